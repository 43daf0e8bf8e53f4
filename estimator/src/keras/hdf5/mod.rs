//! A reader of the HDF5 subset h5py writes, in the tree (no system HDF5 library).
//!
//! Read: superblocks 0 to 3; object headers v1 and v2 with continuations; groups as symbol
//! tables (v1 B-tree, `SNOD` nodes, local heap) or compact link messages; dataspaces;
//! little-endian integers and IEEE floats, fixed- and variable-length strings (global heap);
//! compact, contiguous and chunked layouts (v1 B-tree chunk index, or v4's single chunk) with
//! the deflate and shuffle filters; attributes v1 to v3 in the object header.
//!
//! Anything else (dense link or attribute storage in a fractal heap, other filters and chunk
//! indexes, big-endian data, compound and other datatypes, external and soft links) is
//! [`KerasFileError::Unsupported`] naming the feature and the byte it was met at. Damaged or
//! truncated bytes are [`KerasFileError::Corrupt`] with the byte and what was expected. Every
//! read is bounds-checked and no allocation exceeds a bound derived from the file's length.

mod attribute;
mod btree;
mod bytes;
mod dataspace;
mod datatype;
mod filters;
mod global_heap;
mod group;
mod layout;
mod object_header;
mod superblock;
mod values;

pub use attribute::Attribute;
pub use datatype::Datatype;

use crate::keras::file::KerasFileError;
use group::Target;
use object_header::{Message, ATTRIBUTE, ATTRIBUTE_INFO, DATASPACE, DATATYPE, FILTERS, LAYOUT};
use std::path::{Path, PathBuf};

/// An HDF5 file held in memory.
pub struct Hdf5File {
    path: PathBuf,
    data: Vec<u8>,
    /// Where address 0 is (the superblock's start).
    base: u64,
    sizeof_offsets: u8,
    sizeof_lengths: u8,
    root: u64,
}

impl std::fmt::Debug for Hdf5File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hdf5File")
            .field("path", &self.path)
            .field("len", &self.data.len())
            .finish()
    }
}

impl Hdf5File {
    pub fn open(path: &Path) -> Result<Hdf5File, KerasFileError> {
        let data = std::fs::read(path).map_err(|source| KerasFileError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        Hdf5File::from_bytes(path.to_path_buf(), data)
    }

    /// Reads HDF5 bytes; `path` names them in errors (e.g. `model.keras/model.weights.h5`).
    pub fn from_bytes(path: PathBuf, data: Vec<u8>) -> Result<Hdf5File, KerasFileError> {
        let mut file = Hdf5File {
            path,
            data,
            base: 0,
            sizeof_offsets: 8,
            sizeof_lengths: 8,
            root: 0,
        };
        let start = superblock::find_signature(&file.data)
            .ok_or_else(|| file.corrupt(0, "the HDF5 signature \\x89HDF\\r\\n\\x1a\\n"))?;
        let sb = superblock::read(&mut file, start)?;
        debug_assert!(sb.version <= 3 && sb.start == start);
        file.base = sb.start;
        file.sizeof_offsets = sb.sizeof_offsets;
        file.sizeof_lengths = sb.sizeof_lengths;
        file.root = sb.root;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root group `/`.
    pub fn root(&self) -> Result<Group<'_>, KerasFileError> {
        Ok(Group {
            file: self,
            path: String::new(),
            messages: object_header::read(self, self.root)?,
        })
    }

    /// The group or dataset at a `/`-separated path from the root.
    pub fn get(&self, path: &str) -> Result<Option<Node<'_>>, KerasFileError> {
        let mut node = Node::Group(self.root()?);
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let Node::Group(group) = node else {
                return Ok(None);
            };
            match group.member(part)? {
                Some(next) => node = next,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    pub(crate) fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// `n` bytes at address `at` (relative to the superblock).
    pub(crate) fn slice(&self, at: u64, n: u64, what: &str) -> Result<&[u8], KerasFileError> {
        let start = self.base.checked_add(at);
        let end = start.and_then(|s| s.checked_add(n));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.len() => Ok(&self.data[s as usize..e as usize]),
            _ => Err(self.corrupt(
                at,
                format!("{what} ({n} bytes) inside the file of {} bytes", self.len()),
            )),
        }
    }

    pub(crate) fn corrupt(&self, offset: u64, expected: impl Into<String>) -> KerasFileError {
        KerasFileError::Corrupt {
            file: self.path.clone(),
            offset: offset.saturating_add(self.base),
            expected: expected.into(),
        }
    }

    pub(crate) fn unsupported(&self, offset: u64, feature: impl Into<String>) -> KerasFileError {
        KerasFileError::Unsupported {
            file: self.path.clone(),
            offset: offset.saturating_add(self.base),
            feature: feature.into(),
        }
    }

    pub(crate) fn not_kind(&self, at: u64, wanted: &str, dtype: &Datatype) -> KerasFileError {
        self.corrupt(at, format!("{wanted}, not values of type {dtype:?}"))
    }
}

/// A group or a dataset.
pub enum Node<'f> {
    Group(Group<'f>),
    Dataset(Dataset<'f>),
}

/// A group: named members and attributes.
pub struct Group<'f> {
    file: &'f Hdf5File,
    /// The path from the root, `a/b` (empty for the root).
    path: String,
    messages: Vec<Message>,
}

impl<'f> Group<'f> {
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The members' names, in the order the file lists them (sorted by name for symbol tables).
    pub fn member_names(&self) -> Result<Vec<String>, KerasFileError> {
        Ok(group::members(self.file, &self.messages)?
            .into_iter()
            .map(|(name, _)| name)
            .collect())
    }

    /// The member called `name`, if there is one.
    pub fn member(&self, name: &str) -> Result<Option<Node<'f>>, KerasFileError> {
        let members = group::members(self.file, &self.messages)?;
        let Some((_, target)) = members.into_iter().find(|(n, _)| n == name) else {
            return Ok(None);
        };
        let path = if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.path)
        };
        let address = match target {
            Target::Hard(address) => address,
            Target::Soft(to) => {
                return Err(self.file.unsupported(
                    self.file.root,
                    format!("the soft link `{path}` (to `{to}`)"),
                ))
            }
            Target::External => {
                return Err(self
                    .file
                    .unsupported(self.file.root, format!("the external link `{path}`")))
            }
        };
        let messages = object_header::read(self.file, address)?;
        Ok(Some(if object_header::find(&messages, LAYOUT).is_some() {
            Node::Dataset(Dataset::new(self.file, path, messages, address)?)
        } else {
            Node::Group(Group {
                file: self.file,
                path,
                messages,
            })
        }))
    }

    /// The member `name` if it is a group.
    pub fn group(&self, name: &str) -> Result<Option<Group<'f>>, KerasFileError> {
        Ok(match self.member(name)? {
            Some(Node::Group(g)) => Some(g),
            _ => None,
        })
    }

    pub fn attributes(&self) -> Result<Vec<Attribute<'f>>, KerasFileError> {
        attributes(self.file, &self.messages)
    }

    pub fn attribute(&self, name: &str) -> Result<Option<Attribute<'f>>, KerasFileError> {
        Ok(self.attributes()?.into_iter().find(|a| a.name == name))
    }
}

/// A dataset: its shape and element type, its data read on demand.
pub struct Dataset<'f> {
    file: &'f Hdf5File,
    path: String,
    messages: Vec<Message>,
    /// The object header address (named in errors).
    address: u64,
    pub shape: Vec<u64>,
    pub datatype: Datatype,
}

impl<'f> Dataset<'f> {
    fn new(
        file: &'f Hdf5File,
        path: String,
        messages: Vec<Message>,
        address: u64,
    ) -> Result<Dataset<'f>, KerasFileError> {
        let need = |kind, what: &str| {
            object_header::find(&messages, kind)
                .ok_or_else(|| file.corrupt(address, format!("a {what} message for `{path}`")))
        };
        let shape = dataspace::read(file, need(DATASPACE, "dataspace")?.at)?.unwrap_or_default();
        let datatype = datatype::read(file, need(DATATYPE, "datatype")?.at)?;
        if object_header::find(&messages, object_header::EXTERNAL_FILES).is_some() {
            return Err(file.unsupported(address, "external data files"));
        }
        Ok(Dataset {
            file,
            path,
            messages,
            address,
            shape,
            datatype,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The raw little-endian bytes of all elements, in row-major order.
    pub fn read_bytes(&self) -> Result<Vec<u8>, KerasFileError> {
        let layout_msg = object_header::find(&self.messages, LAYOUT)
            .ok_or_else(|| self.file.corrupt(self.address, "a data layout message"))?;
        let layout = layout::read(self.file, layout_msg)?;
        let filters = match object_header::find(&self.messages, FILTERS) {
            Some(msg) => filters::read(self.file, msg)?,
            None => Vec::new(),
        };
        let element = self.datatype.element_size(self.file);
        let total = attribute::element_count(self.file, self.address, &self.shape)?
            .checked_mul(element)
            .ok_or_else(|| {
                self.file
                    .corrupt(self.address, "a dataset size that fits 64 bits")
            })?;
        layout::read_bytes(
            self.file,
            &layout,
            &filters,
            &self.shape,
            element,
            total,
            self.address,
        )
    }

    /// The elements as f32 (float64 and integers converted).
    pub fn read_f32(&self) -> Result<Vec<f32>, KerasFileError> {
        let bytes = self.read_bytes()?;
        if self.datatype == (Datatype::Float { size: 4 }) {
            return Ok(bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect());
        }
        Ok(
            values::numbers(self.file, self.address, &bytes, &self.datatype)?
                .into_iter()
                .map(|v| v as f32)
                .collect(),
        )
    }

    /// The elements as strings (a dataset of fixed- or variable-length strings).
    pub fn read_strings(&self) -> Result<Vec<String>, KerasFileError> {
        let bytes = self.read_bytes()?;
        values::strings(self.file, self.address, &bytes, &self.datatype)
    }

    pub fn attributes(&self) -> Result<Vec<Attribute<'f>>, KerasFileError> {
        attributes(self.file, &self.messages)
    }
}

fn attributes<'f>(
    file: &'f Hdf5File,
    messages: &[Message],
) -> Result<Vec<Attribute<'f>>, KerasFileError> {
    if let Some(info) = object_header::find(messages, ATTRIBUTE_INFO) {
        let mut r = bytes::Reader::at(file, info.at);
        r.skip(1, "the attribute info version")?;
        let flags = r.u8("the attribute info flags")?;
        if flags & 0x01 != 0 {
            r.skip(2, "the attribute info's maximum creation index")?;
        }
        if r.offset("the attribute info's fractal heap address")? != bytes::UNDEFINED {
            return Err(file.unsupported(
                info.at,
                "dense attribute storage (a fractal heap of attributes)",
            ));
        }
    }
    messages
        .iter()
        .filter(|m| m.kind == ATTRIBUTE)
        .map(|m| attribute::read(file, *m))
        .collect()
}
