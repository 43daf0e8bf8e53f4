//! Names: computation names and instruction names are unique in the module (HLO text refers
//! to both by name).

use super::Report;
use hashbrown::HashMap;

pub(super) fn check(report: &mut Report) {
    let module = report.module;
    let mut computations: HashMap<&str, usize> = HashMap::new();
    let mut instructions: HashMap<&str, &str> = HashMap::with_capacity(module.instruction_count());
    for id in module.computation_ids() {
        let comp = module.computation(id);
        if let Some(first) = computations.insert(&comp.name, id.0 as usize) {
            report.computation(
                id,
                format!(
                    "computation name {} is used twice (computations #{first} and #{})",
                    comp.name, id.0
                ),
            );
        }
        for &i in comp.ids() {
            if !comp.contains(i) {
                continue;
            }
            let name = comp.get(i).name.as_str();
            if let Some(other) = instructions.insert(name, &comp.name) {
                report.instruction(
                    id,
                    i,
                    format!("instruction name {name} is already used in computation {other}"),
                );
            }
        }
    }
}
