//! Random modules for property tests: a script of numbers chooses ops and operands from a
//! small family of shapes, so that every op kind the passes rewrite shows up in many
//! combinations (identities, chains, broadcasts, reductions, dots, loops, calls).

use tessel_compiler::builder::Builder;
use tessel_compiler::ir::*;

/// Builds modules from a script of choices.
pub struct ModuleGen {
    pub m: Module,
    script: Vec<u32>,
    next: usize,
    /// Every value made so far in the entry.
    pool: Vec<InstrId>,
    sum: ComputationId,
    max: ComputationId,
}

fn f32s(dims: &[i64]) -> Shape {
    Shape::array(ElementType::F32, dims)
}

fn s32s(dims: &[i64]) -> Shape {
    Shape::array(ElementType::S32, dims)
}

/// A scalar binary region `(a, b) -> a OP b`.
fn region(m: &mut Module, name: &str, op: BinaryOp, ty: ElementType) -> ComputationId {
    let mut c = Computation::new(name);
    let s = Shape::scalar(ty);
    let a = c.add(
        Instruction::new(format!("{name}.a"), Op::Parameter(0), s.clone()),
        &[],
    );
    let b = c.add(
        Instruction::new(format!("{name}.b"), Op::Parameter(1), s.clone()),
        &[],
    );
    c.add(
        Instruction::new(format!("{name}.r"), Op::Binary(op), s),
        &[a, b],
    );
    m.add_computation(c)
}

impl ModuleGen {
    pub fn new(script: Vec<u32>) -> ModuleGen {
        let mut m = Module::new("generated");
        let sum = region(&mut m, "sum", BinaryOp::Add, ElementType::F32);
        let max = region(&mut m, "max", BinaryOp::Maximum, ElementType::F32);
        let mut g = ModuleGen {
            m,
            script,
            next: 0,
            pool: Vec::new(),
            sum,
            max,
        };
        let shapes = [f32s(&[2, 3]), f32s(&[3]), s32s(&[2, 3]), f32s(&[])];
        for (i, s) in shapes.into_iter().enumerate() {
            let p = g.b().add_with_shape(Op::Parameter(i as u32), s, &[]);
            g.pool.push(p);
        }
        g
    }

    fn b(&mut self) -> Builder<'_> {
        let e = self.m.entry;
        Builder::new(&mut self.m, e)
    }

    fn pick(&mut self) -> u32 {
        let v = self.script.get(self.next).copied().unwrap_or(7);
        self.next += 1;
        v
    }

    fn shape(&self, id: InstrId) -> Shape {
        self.m.entry().get(id).shape.clone()
    }

    /// A value of shape `s`: an existing one when there is, else made from a parameter.
    fn value(&mut self, s: &Shape) -> InstrId {
        let candidates: Vec<InstrId> = self
            .pool
            .iter()
            .copied()
            .filter(|&v| self.shape(v) == *s)
            .collect();
        if !candidates.is_empty() {
            let k = self.pick() as usize % candidates.len();
            return candidates[k];
        }
        self.make(s)
    }

    /// Makes a value of shape `s` from the parameters.
    fn make(&mut self, s: &Shape) -> InstrId {
        let dims = s.dims().to_vec();
        let et = s.element_type().unwrap();
        let base = if et == ElementType::S32 {
            self.pool[2]
        } else {
            self.pool[3]
        };
        let id = match (et, dims.as_slice()) {
            (ElementType::F32, [2, 3]) => self.pool[0],
            (ElementType::F32, [3]) => self.pool[1],
            (ElementType::S32, [2, 3]) => self.pool[2],
            (ElementType::F32, []) => self.pool[3],
            (ElementType::Pred, _) => {
                let x = self.value(&f32s(&dims));
                let y = self.value(&f32s(&dims));
                self.add(
                    Op::Compare {
                        direction: ComparisonDirection::Lt,
                        comparison_type: None,
                    },
                    &[x, y],
                )
            }
            _ => {
                let scalar = if et == ElementType::S32 {
                    self.constant_s32(1)
                } else {
                    base
                };
                self.b()
                    .add_with_shape(Op::Broadcast { dimensions: vec![] }, s.clone(), &[scalar])
            }
        };
        id
    }

    fn add(&mut self, op: Op, operands: &[InstrId]) -> InstrId {
        let id = self
            .b()
            .add(op.clone(), operands)
            .unwrap_or_else(|e| panic!("generator built a bad {}: {e}", op.opcode_name()));
        self.pool.push(id);
        id
    }

    fn add_shaped(&mut self, op: Op, shape: Shape, operands: &[InstrId]) -> InstrId {
        let id = self.b().add_with_shape(op, shape, operands);
        self.pool.push(id);
        id
    }

    fn constant_f32(&mut self, x: f32) -> InstrId {
        self.add_shaped(
            Op::Constant(Literal::Array(Array::scalar_f32(x))),
            f32s(&[]),
            &[],
        )
    }

    fn constant_s32(&mut self, x: i32) -> InstrId {
        self.add_shaped(
            Op::Constant(Literal::Array(Array::scalar_s32(x))),
            s32s(&[]),
            &[],
        )
    }

    fn float_array(&mut self) -> InstrId {
        let shapes = [f32s(&[2, 3]), f32s(&[3, 2]), f32s(&[3]), f32s(&[2, 2])];
        let k = self.pick() as usize % shapes.len();
        self.value(&shapes[k])
    }

    /// Adds one op chosen by the script.
    pub fn step(&mut self) {
        let f23 = f32s(&[2, 3]);
        let choice = self.pick() % 29;
        match choice {
            0 => {
                let ops = [
                    UnaryOp::Abs,
                    UnaryOp::Negate,
                    UnaryOp::Tanh,
                    UnaryOp::Sine,
                    UnaryOp::Cosine,
                    UnaryOp::Floor,
                    UnaryOp::Sign,
                    UnaryOp::Logistic,
                    UnaryOp::Exp,
                ];
                let u = ops[self.pick() as usize % ops.len()];
                let x = self.float_array();
                self.add(Op::Unary(u), &[x]);
            }
            1 => {
                let ops = [
                    BinaryOp::Add,
                    BinaryOp::Subtract,
                    BinaryOp::Multiply,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                    BinaryOp::Divide,
                ];
                let o = ops[self.pick() as usize % ops.len()];
                let x = self.float_array();
                let s = self.shape(x);
                let y = self.value(&s);
                self.add(Op::Binary(o), &[x, y]);
            }
            2 => {
                let ops = [
                    BinaryOp::Add,
                    BinaryOp::Multiply,
                    BinaryOp::Xor,
                    BinaryOp::And,
                    BinaryOp::Subtract,
                ];
                let o = ops[self.pick() as usize % ops.len()];
                let x = self.value(&s32s(&[2, 3]));
                let y = self.value(&s32s(&[2, 3]));
                self.add(Op::Binary(o), &[x, y]);
            }
            3 => {
                let (src, dims, out) = match self.pick() % 3 {
                    0 => (f32s(&[]), vec![], f23.clone()),
                    1 => (f32s(&[3]), vec![1], f23.clone()),
                    _ => (f32s(&[2]), vec![0], f23.clone()),
                };
                let x = self.value(&src);
                self.add_shaped(Op::Broadcast { dimensions: dims }, out, &[x]);
            }
            4 => {
                let x = self.value(&f23);
                let r = self.add_shaped(Op::Reshape, f32s(&[3, 2]), &[x]);
                if self.pick().is_multiple_of(2) {
                    self.add_shaped(Op::Reshape, f23.clone(), &[r]);
                }
            }
            5 => {
                let x = self.value(&f23);
                let t = self.add(
                    Op::Transpose {
                        permutation: vec![1, 0],
                    },
                    &[x],
                );
                if self.pick().is_multiple_of(2) {
                    self.add(
                        Op::Transpose {
                            permutation: vec![1, 0],
                        },
                        &[t],
                    );
                }
            }
            6 => {
                let x = self.value(&f23);
                let start = (self.pick() % 2) as i64;
                let s = self.add(
                    Op::Slice {
                        dims: vec![
                            SliceDim {
                                start: 0,
                                limit: 2,
                                stride: 1,
                            },
                            SliceDim {
                                start,
                                limit: start + 2,
                                stride: 1,
                            },
                        ],
                    },
                    &[x],
                );
                if self.pick().is_multiple_of(2) {
                    self.add(
                        Op::Slice {
                            dims: vec![
                                SliceDim {
                                    start: 1,
                                    limit: 2,
                                    stride: 1,
                                },
                                SliceDim {
                                    start: 0,
                                    limit: 2,
                                    stride: 1,
                                },
                            ],
                        },
                        &[s],
                    );
                }
            }
            7 => {
                let x = self.value(&f32s(&[2, 2]));
                let v = self.value(&f32s(&[]));
                let low = (self.pick() % 2) as i64;
                self.add(
                    Op::Pad {
                        dims: vec![
                            PadDim {
                                low: 0,
                                high: 0,
                                interior: 0,
                            },
                            PadDim {
                                low,
                                high: 1 - low,
                                interior: 0,
                            },
                        ],
                    },
                    &[x, v],
                );
            }
            8 => {
                let x = self.value(&f23);
                let y = self.value(&f23);
                let c = self.add(Op::Concatenate { dimension: 0 }, &[x, y]);
                let start = (self.pick() % 3) as i64;
                self.add(
                    Op::Slice {
                        dims: vec![
                            SliceDim {
                                start,
                                limit: start + 2,
                                stride: 1,
                            },
                            SliceDim {
                                start: 0,
                                limit: 3,
                                stride: 1,
                            },
                        ],
                    },
                    &[c],
                );
            }
            9 => {
                let x = self.value(&f23);
                let d = (self.pick() % 2) as i64;
                self.add(
                    Op::Reverse {
                        dimensions: vec![d],
                    },
                    &[x],
                );
            }
            10 => {
                let x = self.value(&f23);
                let init = self.constant_f32(0.0);
                let (dims, to_apply) = match self.pick() % 3 {
                    0 => (vec![1], self.sum),
                    1 => (vec![0], self.sum),
                    _ => (vec![1], self.max),
                };
                let init = if to_apply == self.max {
                    self.constant_f32(-1.0e30)
                } else {
                    init
                };
                self.add(
                    Op::Reduce {
                        dimensions: dims,
                        to_apply,
                    },
                    &[x, init],
                );
            }
            11 => {
                let x = self.value(&f23);
                let y = self.value(&f32s(&[3, 2]));
                let dn = DotDimensionNumbers {
                    lhs_contracting: vec![1],
                    rhs_contracting: vec![0],
                    ..Default::default()
                };
                if self.pick().is_multiple_of(2) {
                    // dot(transpose(a), b) for the simplifier to fold.
                    let t = self.add(
                        Op::Transpose {
                            permutation: vec![1, 0],
                        },
                        &[y],
                    );
                    let dn = DotDimensionNumbers {
                        lhs_contracting: vec![1],
                        rhs_contracting: vec![1],
                        ..Default::default()
                    };
                    self.add(Op::Dot(dn), &[x, t]);
                } else {
                    self.add(Op::Dot(dn), &[x, y]);
                }
            }
            12 => {
                if self.pick().is_multiple_of(2) {
                    let x = self.value(&f23);
                    self.add_shaped(Op::Convert, s32s(&[2, 3]), &[x]);
                } else {
                    let x = self.value(&s32s(&[2, 3]));
                    self.add_shaped(Op::Convert, f23.clone(), &[x]);
                }
            }
            13 => {
                let x = self.value(&f23);
                let y = self.value(&f23);
                let dirs = ComparisonDirection::ALL;
                let d = dirs[self.pick() as usize % dirs.len()];
                let p = self.add(
                    Op::Compare {
                        direction: d,
                        comparison_type: None,
                    },
                    &[x, y],
                );
                self.add(Op::Select, &[p, x, y]);
            }
            14 => {
                let lo = self.value(&f23);
                let x = self.value(&f23);
                let hi = self.value(&f23);
                self.add(Op::Clamp, &[lo, x, hi]);
            }
            15 => {
                let i = self.add_shaped(Op::Iota { dimension: 1 }, s32s(&[2, 3]), &[]);
                let k = self.constant_s32(2);
                let b = self.add_shaped(Op::Broadcast { dimensions: vec![] }, s32s(&[2, 3]), &[k]);
                self.add(Op::Binary(BinaryOp::Multiply), &[i, b]);
            }
            16 => {
                // Identities for the simplifier.
                let x = self.value(&f23);
                let (v, op) = match self.pick() % 4 {
                    0 => (0.0, BinaryOp::Add),
                    1 => (1.0, BinaryOp::Multiply),
                    2 => (0.0, BinaryOp::Subtract),
                    _ => (1.0, BinaryOp::Divide),
                };
                let k = self.constant_f32(v);
                let b = self.add_shaped(Op::Broadcast { dimensions: vec![] }, f23.clone(), &[k]);
                self.add(Op::Binary(op), &[x, b]);
            }
            17 => {
                let x = self.value(&f23);
                let n = self.add(Op::Unary(UnaryOp::Negate), &[x]);
                self.add(Op::Unary(UnaryOp::Negate), &[n]);
            }
            18 => {
                let x = self.value(&f23);
                let i = self.constant_s32(0);
                let jv = (self.pick() % 3) as i32;
                let j = self.constant_s32(jv);
                if self.pick().is_multiple_of(2) {
                    self.add(Op::DynamicSlice { sizes: vec![2, 2] }, &[x, i, j]);
                } else {
                    let u = self.value(&f32s(&[2, 2]));
                    self.add(Op::DynamicUpdateSlice, &[x, u, i, j]);
                }
            }
            19 => {
                let x = self.float_array();
                let y = self.value(&s32s(&[2, 3]));
                let t = self.add(Op::Tuple, &[x, y]);
                self.add(Op::GetTupleElement { index: 0 }, &[t]);
            }
            20 => self.call(),
            21 => self.while_loop(),
            22 => {
                // Common subexpressions.
                let x = self.value(&f23);
                let a = self.add(Op::Unary(UnaryOp::Tanh), &[x]);
                let b = self.add(Op::Unary(UnaryOp::Tanh), &[x]);
                self.add(Op::Binary(BinaryOp::Add), &[a, b]);
            }
            23 => self.convolution(),
            24 => {
                let x = self.value(&f23);
                let init = self.constant_f32(-1.0e30);
                let mut w = Window::default();
                w.dims.push(WindowDim::new(1));
                w.dims.push(WindowDim::new(2));
                self.add(
                    Op::ReduceWindow {
                        window: w,
                        to_apply: self.max,
                    },
                    &[x, init],
                );
            }
            25 => self.select_and_scatter(),
            26 => {
                let x = self.value(&f23);
                let b = self.add_shaped(Op::BitcastConvert, s32s(&[2, 3]), &[x]);
                self.add(Op::Binary(BinaryOp::Xor), &[b, b]);
            }
            27 => self.conditional(),
            _ => {
                // Copy and convert to the same type.
                let x = self.value(&f23);
                let c = self.add(Op::Copy, &[x]);
                self.add_shaped(Op::Convert, f23.clone(), &[c]);
            }
        }
    }

    fn region_ge(&mut self) -> ComputationId {
        let mut c = Computation::new(self.m.unique_name("ge"));
        let s = f32s(&[]);
        let a = c.add(
            Instruction::new(self.m.unique_name("a"), Op::Parameter(0), s.clone()),
            &[],
        );
        let b = c.add(
            Instruction::new(self.m.unique_name("b"), Op::Parameter(1), s),
            &[],
        );
        c.add(
            Instruction::new(
                self.m.unique_name("ge"),
                Op::Compare {
                    direction: ComparisonDirection::Ge,
                    comparison_type: None,
                },
                Shape::scalar(ElementType::Pred),
            ),
            &[a, b],
        );
        self.m.add_computation(c)
    }

    /// A 2x2 convolution of a `[1,2,3,1]` image, its kernel sometimes through a transpose.
    fn convolution(&mut self) {
        let x = self.value(&f32s(&[2, 3]));
        let img = self.add_shaped(Op::Reshape, f32s(&[1, 2, 3, 1]), &[x]);
        let k = self.value(&f32s(&[2, 2]));
        let k4 = self.add_shaped(Op::Reshape, f32s(&[2, 2, 1, 1]), &[k]);
        let kernel = if self.pick().is_multiple_of(2) {
            self.add(
                Op::Transpose {
                    permutation: vec![1, 0, 2, 3],
                },
                &[k4],
            )
        } else {
            k4
        };
        let mut window = Window::default();
        for _ in 0..2 {
            let mut d = WindowDim::new(2);
            d.pad_high = 1;
            window.dims.push(d);
        }
        let conv = Convolution {
            window,
            dims: ConvDimensionNumbers::nhwc_hwio(),
            feature_group_count: 1,
            batch_group_count: 1,
        };
        let c = self.add(Op::Convolution(conv), &[img, kernel]);
        self.add_shaped(Op::Reshape, f32s(&[2, 3]), &[c]);
    }

    /// The gradient of a 1x2 max-pool: select-and-scatter of a `[2,2]` source into `[2,3]`.
    fn select_and_scatter(&mut self) {
        let x = self.value(&f32s(&[2, 3]));
        let src = self.value(&f32s(&[2, 2]));
        let zero = self.constant_f32(0.0);
        let mut window = Window::default();
        window.dims.push(WindowDim::new(1));
        window.dims.push(WindowDim::new(2));
        let select = self.region_ge();
        self.add(
            Op::SelectAndScatter {
                window,
                select,
                scatter: self.sum,
            },
            &[x, src, zero],
        );
    }

    /// `conditional` on `x[0,0] < y[0,0]` between `exp` and `negate` of a value.
    fn conditional(&mut self) {
        let s = f32s(&[2, 3]);
        let mut branches = Vec::new();
        for u in [UnaryOp::Exp, UnaryOp::Negate] {
            let mut c = Computation::new(self.m.unique_name("branch"));
            let p = c.add(
                Instruction::new(self.m.unique_name("p"), Op::Parameter(0), s.clone()),
                &[],
            );
            let e = c.add(
                Instruction::new(self.m.unique_name(u.name()), Op::Unary(u), s.clone()),
                &[p],
            );
            let one = c.add(
                Instruction::new(
                    self.m.unique_name("one"),
                    Op::Constant(Literal::Array(Array::scalar_f32(1.0))),
                    f32s(&[]),
                ),
                &[],
            );
            let ones = c.add(
                Instruction::new(
                    self.m.unique_name("ones"),
                    Op::Broadcast { dimensions: vec![] },
                    s.clone(),
                ),
                &[one],
            );
            c.add(
                Instruction::new(
                    self.m.unique_name("times_one"),
                    Op::Binary(BinaryOp::Multiply),
                    s.clone(),
                ),
                &[e, ones],
            );
            branches.push(self.m.add_computation(c));
        }
        let x = self.value(&s);
        let y = self.value(&s);
        let corner = SliceDim {
            start: 0,
            limit: 1,
            stride: 1,
        };
        let xs = self.add(
            Op::Slice {
                dims: vec![corner, corner],
            },
            &[x],
        );
        let ys = self.add(
            Op::Slice {
                dims: vec![corner, corner],
            },
            &[y],
        );
        let xr = self.add_shaped(Op::Reshape, f32s(&[]), &[xs]);
        let yr = self.add_shaped(Op::Reshape, f32s(&[]), &[ys]);
        let p = self.add(
            Op::Compare {
                direction: ComparisonDirection::Lt,
                comparison_type: None,
            },
            &[xr, yr],
        );
        let arg = self.value(&s);
        self.add(Op::Conditional { branches }, &[p, arg, arg]);
    }

    /// `call` of a computation computing `tanh(a) * b`.
    fn call(&mut self) {
        let s = f32s(&[2, 3]);
        let mut c = Computation::new(self.m.unique_name("callee"));
        let a = c.add(
            Instruction::new(self.m.unique_name("a"), Op::Parameter(0), s.clone()),
            &[],
        );
        let b = c.add(
            Instruction::new(self.m.unique_name("b"), Op::Parameter(1), s.clone()),
            &[],
        );
        let t = c.add(
            Instruction::new(
                self.m.unique_name("tanh"),
                Op::Unary(UnaryOp::Tanh),
                s.clone(),
            ),
            &[a],
        );
        c.add(
            Instruction::new(
                self.m.unique_name("multiply"),
                Op::Binary(BinaryOp::Multiply),
                s.clone(),
            ),
            &[t, b],
        );
        let callee = self.m.add_computation(c);
        let x = self.value(&s);
        let y = self.value(&s);
        self.add(Op::Call { to_apply: callee }, &[x, y]);
    }

    /// A 3-iteration loop over `(i, x, w, unused)`: `x = x * tanh(w) + 1`, with `tanh(w)`
    /// invariant and `unused` dead state.
    fn while_loop(&mut self) {
        let s = f32s(&[2, 3]);
        let i32s = s32s(&[]);
        let state = Shape::Tuple(vec![i32s.clone(), s.clone(), s.clone(), s.clone()]);
        let names = |m: &mut Module, b: &str| m.unique_name(b);
        // Condition: i < 3.
        let mut cond = Computation::new(names(&mut self.m, "cond"));
        let p = cond.add(
            Instruction::new(names(&mut self.m, "p"), Op::Parameter(0), state.clone()),
            &[],
        );
        let i = cond.add(
            Instruction::new(
                names(&mut self.m, "i"),
                Op::GetTupleElement { index: 0 },
                i32s.clone(),
            ),
            &[p],
        );
        let three = cond.add(
            Instruction::new(
                names(&mut self.m, "three"),
                Op::Constant(Literal::Array(Array::scalar_s32(3))),
                i32s.clone(),
            ),
            &[],
        );
        cond.add(
            Instruction::new(
                names(&mut self.m, "lt"),
                Op::Compare {
                    direction: ComparisonDirection::Lt,
                    comparison_type: None,
                },
                Shape::scalar(ElementType::Pred),
            ),
            &[i, three],
        );
        // Body.
        let mut body = Computation::new(names(&mut self.m, "body"));
        let p = body.add(
            Instruction::new(names(&mut self.m, "p"), Op::Parameter(0), state.clone()),
            &[],
        );
        let gte = |body: &mut Computation, m: &mut Module, k: i64, sh: &Shape| {
            body.add(
                Instruction::new(
                    m.unique_name("gte"),
                    Op::GetTupleElement { index: k },
                    sh.clone(),
                ),
                &[p],
            )
        };
        let i = gte(&mut body, &mut self.m, 0, &i32s);
        let x = gte(&mut body, &mut self.m, 1, &s);
        let w = gte(&mut body, &mut self.m, 2, &s);
        let u = gte(&mut body, &mut self.m, 3, &s);
        let inst = |body: &mut Computation, m: &mut Module, op: Op, sh: &Shape, ops: &[InstrId]| {
            let n = m.unique_name(op.opcode_name());
            body.add(Instruction::new(n, op, sh.clone()), ops)
        };
        let one = inst(
            &mut body,
            &mut self.m,
            Op::Constant(Literal::Array(Array::scalar_s32(1))),
            &i32s,
            &[],
        );
        let i2 = inst(
            &mut body,
            &mut self.m,
            Op::Binary(BinaryOp::Add),
            &i32s,
            &[i, one],
        );
        let tw = inst(&mut body, &mut self.m, Op::Unary(UnaryOp::Tanh), &s, &[w]);
        let xw = inst(
            &mut body,
            &mut self.m,
            Op::Binary(BinaryOp::Multiply),
            &s,
            &[x, tw],
        );
        let onef = inst(
            &mut body,
            &mut self.m,
            Op::Constant(Literal::Array(Array::scalar_f32(1.0))),
            &f32s(&[]),
            &[],
        );
        let ones = inst(
            &mut body,
            &mut self.m,
            Op::Broadcast { dimensions: vec![] },
            &s,
            &[onef],
        );
        let x2 = inst(
            &mut body,
            &mut self.m,
            Op::Binary(BinaryOp::Add),
            &s,
            &[xw, ones],
        );
        let u2 = inst(&mut body, &mut self.m, Op::Unary(UnaryOp::Exp), &s, &[u]);
        inst(&mut body, &mut self.m, Op::Tuple, &state, &[i2, x2, w, u2]);
        let condition = self.m.add_computation(cond);
        let body = self.m.add_computation(body);
        let zero = self.constant_s32(0);
        let x0 = self.value(&s);
        let w0 = self.value(&s);
        let u0 = self.value(&s);
        let init = self.add(Op::Tuple, &[zero, x0, w0, u0]);
        let lp = self.add(Op::While { condition, body }, &[init]);
        self.add(Op::GetTupleElement { index: 1 }, &[lp]);
    }

    /// Runs `steps` script steps and makes the root a tuple of the last few values.
    pub fn finish(mut self, steps: usize) -> Module {
        for _ in 0..steps {
            self.step();
        }
        let n = 1 + self.pick() as usize % 3;
        let mut outs: Vec<InstrId> = Vec::new();
        for &v in self.pool.iter().rev() {
            if outs.len() == n {
                break;
            }
            if self.shape(v).is_array() && !outs.contains(&v) {
                outs.push(v);
            }
        }
        let shapes: Vec<Shape> = outs.iter().map(|&o| self.shape(o)).collect();
        let root = self
            .b()
            .add_with_shape(Op::Tuple, Shape::Tuple(shapes), &outs);
        self.m.entry_mut().set_root(root);
        self.m
    }
}
