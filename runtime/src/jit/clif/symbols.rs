//! Symbols for the addresses generated code uses outside the arena: constants, routine plans,
//! profile counters and Rust functions.
//!
//! Generated code never holds such an address as an immediate. It reads it from a data symbol
//! (`symbol_value`) that the JIT module links when it finalizes the code, so the CLIF of one
//! module is the same on every compile (reproducible `JitOptions::dump_to` dumps). On x86-64
//! without PIC the linked symbol is the same `movabs` an immediate was, so the machine code
//! costs nothing more.
//!
//! Every symbol is an imported data object of the JIT module, named in the order the code first
//! asks for it; [`Symbols::declare`] declares the new ones before each function is defined, so
//! symbol `k` is data object `k` (this module declares no other data objects).

use super::super::buffer::ConstPool;
use super::super::JitError;
use cranelift_codegen::ir::immediates::Imm64;
use cranelift_codegen::ir::Value;
use cranelift_codegen::ir::{types, ExternalName, GlobalValueData, InstBuilder, UserExternalName};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module as _};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The `UserExternalName` namespace of data objects in `cranelift_module`.
const DATA_NAMESPACE: u32 = 1;

/// Address of every symbol by name, shared with the JIT module's symbol lookup.
type AddressTable = Arc<Mutex<HashMap<String, usize>>>;

/// A symbol lookup as `JITBuilder::symbol_lookup_fn` takes it.
pub(crate) type SymbolLookup = Box<dyn Fn(&str) -> Option<*const u8> + Send>;

/// The symbols of one program and the constants they name.
pub(crate) struct Symbols {
    table: RefCell<Table>,
    addresses: AddressTable,
}

#[derive(Default)]
struct Table {
    /// Name of symbol `k`.
    names: Vec<String>,
    /// First address of each symbol -> (symbol, bytes it covers).
    by_start: BTreeMap<usize, (u32, usize)>,
    /// Symbols already declared in the JIT module.
    declared: usize,
    consts: ConstPool,
}

impl Default for Symbols {
    fn default() -> Self {
        Symbols {
            table: RefCell::new(Table::default()),
            addresses: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

impl Symbols {
    /// The lookup to register with the JIT builder: resolves the symbols named here.
    pub(crate) fn lookup_fn(&self) -> SymbolLookup {
        let addresses = self.addresses.clone();
        Box::new(move |name| {
            let table = addresses.lock().unwrap_or_else(|p| p.into_inner());
            table.get(name).map(|&a| a as *const u8)
        })
    }

    /// Stores constant `bytes` (8-byte aligned) for the executable and returns their address,
    /// which generated code reaches through a symbol.
    pub(crate) fn constant(&self, bytes: &[u8]) -> usize {
        let addr = self.table.borrow_mut().consts.add(bytes);
        self.name("const", addr, bytes.len());
        addr
    }

    /// Names `len` bytes at `addr` (a plan or counters the executable keeps alive, or a Rust
    /// function when `len` is 0). Naming an address twice gives the first symbol.
    pub(crate) fn name(&self, kind: &str, addr: usize, len: usize) {
        let mut t = self.table.borrow_mut();
        if t.by_start.contains_key(&addr) {
            return;
        }
        let k = t.names.len() as u32;
        let name = format!("tessel_{kind}{k}");
        self.addresses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone(), addr);
        t.names.push(name);
        t.by_start.insert(addr, (k, len));
    }

    /// The symbol and offset of `addr`, which must lie in (or, for a function, start) a named
    /// block.
    fn locate(&self, addr: usize) -> (u32, i64) {
        let t = self.table.borrow();
        let (&start, &(k, len)) = t
            .by_start
            .range(..=addr)
            .next_back()
            .expect("address without a symbol");
        assert!(
            addr == start || addr < start + len,
            "address without a symbol"
        );
        (k, (addr - start) as i64)
    }

    /// `addr` as a value in the function being built, read from its symbol.
    pub(crate) fn value(&self, fb: &mut FunctionBuilder, addr: usize) -> Value {
        let (k, offset) = self.locate(addr);
        let name = fb
            .func
            .declare_imported_user_function(UserExternalName::new(DATA_NAMESPACE, k));
        let gv = fb.create_global_value(GlobalValueData::Symbol {
            name: ExternalName::user(name),
            offset: Imm64::new(offset),
            colocated: false,
            tls: false,
        });
        fb.ins().symbol_value(types::I64, gv)
    }

    /// The address of Rust function `f` as a value: names it first.
    pub(crate) fn function(&self, fb: &mut FunctionBuilder, f: usize) -> Value {
        self.name("fn", f, 0);
        self.value(fb, f)
    }

    /// Declares the symbols named since the last call as data objects of `jit` (call before
    /// defining a function that uses them).
    pub(crate) fn declare(&self, jit: &mut JITModule) -> Result<(), JitError> {
        let mut t = self.table.borrow_mut();
        while t.declared < t.names.len() {
            let k = t.declared;
            let id = jit
                .declare_data(&t.names[k], Linkage::Import, false, false)
                .map_err(|e| JitError::Codegen(e.to_string()))?;
            // Symbol k is referred to as data object k.
            assert_eq!(
                id.as_u32() as usize,
                k,
                "data object declared outside Symbols"
            );
            t.declared += 1;
        }
        Ok(())
    }

    /// The constants, which the executable keeps alive as long as its code.
    pub(crate) fn into_consts(self) -> ConstPool {
        self.table.into_inner().consts
    }

    /// Bytes of constants stored so far.
    pub(crate) fn constant_bytes(&self) -> usize {
        self.table.borrow().consts.total_bytes()
    }
}
