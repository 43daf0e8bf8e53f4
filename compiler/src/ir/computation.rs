//! A computation: a graph of instructions (petgraph), with one root and numbered parameters.
//!
//! Nodes are instructions; an edge `a -> b` means `b` uses `a` (one edge per operand slot).
//! The operand order lives in [`Instruction::operands`]; the edges answer "who uses this?".

use super::instruction::{InstrId, Instruction};
use super::op::Op;
use petgraph::stable_graph::StableDiGraph;
use petgraph::Direction;

#[derive(Clone, Debug)]
pub struct Computation {
    pub name: String,
    graph: StableDiGraph<Instruction, (), u32>,
    /// Instruction order as written or built; printing uses a topological order that follows it.
    order: Vec<InstrId>,
    root: Option<InstrId>,
}

impl Computation {
    pub fn new(name: impl Into<String>) -> Computation {
        Computation {
            name: name.into(),
            graph: StableDiGraph::default(),
            order: Vec::new(),
            root: None,
        }
    }

    /// Adds an instruction with the given operands; the last one added becomes the root
    /// unless [`Computation::set_root`] says otherwise.
    pub fn add(&mut self, mut instr: Instruction, operands: &[InstrId]) -> InstrId {
        instr.operands = operands.iter().copied().collect();
        let id = self.graph.add_node(instr);
        for &o in operands {
            self.graph.add_edge(o, id, ());
        }
        self.order.push(id);
        id
    }

    pub fn get(&self, id: InstrId) -> &Instruction {
        &self.graph[id]
    }

    /// Mutable access to everything but the operands (see [`Computation::set_operand`]).
    pub fn get_mut(&mut self, id: InstrId) -> &mut Instruction {
        &mut self.graph[id]
    }

    pub fn contains(&self, id: InstrId) -> bool {
        self.graph.contains_node(id)
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    pub fn root(&self) -> InstrId {
        self.root
            .or_else(|| self.order.last().copied())
            .expect("computation has no instructions")
    }

    pub fn has_root(&self) -> bool {
        self.root.is_some() || !self.order.is_empty()
    }

    pub fn set_root(&mut self, id: InstrId) {
        self.root = Some(id);
    }

    /// Instruction ids in stored order (not necessarily topological after rewrites).
    pub fn ids(&self) -> &[InstrId] {
        &self.order
    }

    /// Parameters sorted by parameter number.
    pub fn parameters(&self) -> Vec<InstrId> {
        let mut params: Vec<(u32, InstrId)> = self
            .order
            .iter()
            .filter_map(|&id| match self.graph[id].op {
                Op::Parameter(n) => Some((n, id)),
                _ => None,
            })
            .collect();
        params.sort();
        params.into_iter().map(|(_, id)| id).collect()
    }

    pub fn parameter(&self, number: u32) -> Option<InstrId> {
        self.order
            .iter()
            .copied()
            .find(|&id| self.graph[id].op == Op::Parameter(number))
    }

    /// Instructions using `id`, each once, in stored order.
    pub fn users(&self, id: InstrId) -> Vec<InstrId> {
        let mut users: Vec<InstrId> = self
            .graph
            .neighbors_directed(id, Direction::Outgoing)
            .collect();
        // A position is a scan of the stored order: once per user, not once per comparison.
        users.sort_by_cached_key(|u| self.position(*u));
        users.dedup();
        users
    }

    /// The users of `id` in no particular order, one per operand slot that reads it: for
    /// graph walks that do not need [`Computation::users`]' order (which costs a scan of the
    /// stored order per user).
    pub(crate) fn users_unordered(&self, id: InstrId) -> impl Iterator<Item = InstrId> + '_ {
        self.graph.neighbors_directed(id, Direction::Outgoing)
    }

    /// One more than the largest instruction index in use: the length of a table indexed
    /// by `InstrId::index()`.
    pub(crate) fn index_bound(&self) -> usize {
        petgraph::visit::NodeIndexable::node_bound(&self.graph)
    }

    fn position(&self, id: InstrId) -> usize {
        self.order
            .iter()
            .position(|&x| x == id)
            .unwrap_or(usize::MAX)
    }

    /// Replaces operand slot `index` of `user` with `new`.
    pub(crate) fn set_operand(&mut self, user: InstrId, index: usize, new: InstrId) {
        let old = self.graph[user].operands[index];
        if old == new {
            return;
        }
        if let Some(e) = self.graph.find_edge(old, user) {
            self.graph.remove_edge(e);
        }
        self.graph.add_edge(new, user, ());
        self.graph[user].operands[index] = new;
    }

    /// Makes every user of `old` (and the root, if it is `old`) use `new` instead.
    pub(crate) fn replace_all_uses(&mut self, old: InstrId, new: InstrId) {
        if old == new {
            return;
        }
        for user in self.users(old) {
            if user == new {
                continue;
            }
            let n = self.graph[user].operands.len();
            for i in 0..n {
                if self.graph[user].operands[i] == old {
                    self.set_operand(user, i, new);
                }
            }
        }
        if self.root == Some(old) || (self.root.is_none() && self.order.last() == Some(&old)) {
            self.root = Some(new);
        }
    }

    /// Removes an instruction that nothing uses any more. Returns it.
    pub fn remove(&mut self, id: InstrId) -> Instruction {
        debug_assert!(
            self.users(id).is_empty(),
            "removing {} which still has users",
            self.graph[id].name
        );
        if self.root.is_none() && self.order.last() == Some(&id) {
            panic!("removing the root of {}", self.name);
        }
        self.order.retain(|&x| x != id);
        self.graph.remove_node(id).expect("instruction exists")
    }

    /// Removes every instruction of `ids`, listed operands before users, each used only by
    /// later ones of `ids`: the same as [`Computation::remove`] on each in reverse, with one
    /// pass over the stored order instead of one per instruction (a fusion of 256
    /// instructions out of a 200,000-instruction chain).
    pub(crate) fn remove_all(&mut self, ids: &[InstrId]) {
        let set: hashbrown::HashSet<InstrId> = ids.iter().copied().collect();
        for &id in ids.iter().rev() {
            debug_assert!(
                self.users_unordered(id).all(|u| set.contains(&u)),
                "removing {} which still has users",
                self.graph[id].name
            );
            if self.root.is_none() && self.order.last() == Some(&id) {
                panic!("removing the root of {}", self.name);
            }
        }
        self.order.retain(|x| !set.contains(x));
        for &id in ids.iter().rev() {
            self.graph.remove_node(id).expect("instruction exists");
        }
    }

    /// A topological order (operands before users) that follows the stored order where it
    /// can; includes instructions not reachable from the root.
    pub fn post_order(&self) -> Vec<InstrId> {
        // A table by instruction index, not a hash set: the fusion pass calls this once per
        // fusion, so on long programs its cost adds up.
        let mut visited = vec![false; self.index_bound()];
        let mut out = Vec::with_capacity(self.order.len());
        for &start in &self.order {
            if visited[start.index()] {
                continue;
            }
            // Iterative DFS: (node, next operand index to visit).
            let mut stack = vec![(start, 0usize)];
            visited[start.index()] = true;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let operands = &self.graph[node].operands;
                if *next < operands.len() {
                    let o = operands[*next];
                    *next += 1;
                    if !visited[o.index()] {
                        visited[o.index()] = true;
                        stack.push((o, 0));
                    }
                } else {
                    out.push(node);
                    stack.pop();
                }
            }
        }
        out
    }

    /// Replaces the stored order with `order` (a scheduler's choice). `order` must hold every
    /// instruction exactly once; it should be topological, as printing and evaluation follow it.
    pub(crate) fn set_order(&mut self, order: Vec<InstrId>) {
        assert_eq!(
            order.len(),
            self.graph.node_count(),
            "order must list every instruction"
        );
        self.order = order;
    }

    /// Iterates `(id, instruction)` in topological order.
    pub fn instructions(&self) -> impl Iterator<Item = (InstrId, &Instruction)> + '_ {
        self.post_order()
            .into_iter()
            .map(move |id| (id, &self.graph[id]))
    }

    /// The underlying graph, for analyses that want petgraph's algorithms.
    pub fn graph(&self) -> &StableDiGraph<Instruction, (), u32> {
        &self.graph
    }

    /// Finds an instruction by name.
    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.order
            .iter()
            .copied()
            .find(|&id| self.graph[id].name == name)
    }
}
