//! The device mesh of a shard_map module and the sharding attributes that name its axes.

use super::{fail, ShardMapError};
use tessel_compiler::ir::{InstrId, Module};

/// The mesh: axis names and sizes, in order (major to minor).
#[derive(Clone, Debug, PartialEq)]
pub struct Mesh {
    pub axes: Vec<(String, usize)>,
}

impl Mesh {
    /// Reads `xla.sdy.meshes={mesh = #sdy.mesh<["r"=4]>}` from the module's attributes.
    pub fn of_module(module: &Module) -> Result<Mesh, ShardMapError> {
        let text = module
            .frontend_attributes
            .iter()
            .find(|(k, _)| k == "xla.sdy.meshes")
            .map(|(_, v)| v.replace('\\', ""))
            .ok_or_else(|| ShardMapError {
                message: "the module has no xla.sdy.meshes attribute, so its mesh is unknown"
                    .into(),
            })?;
        let mut axes = Vec::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find('"') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('"') else { break };
            let name = after[..end].to_string();
            let tail = after[end + 1..].trim_start();
            let Some(tail) = tail.strip_prefix('=') else {
                rest = &after[end + 1..];
                continue;
            };
            let digits: String = tail
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            let size = digits.parse::<usize>().map_err(|_| ShardMapError {
                message: format!("cannot read the size of mesh axis \"{name}\" in {text}"),
            })?;
            axes.push((name, size));
            rest = tail;
        }
        if axes.is_empty() {
            return fail(format!("no mesh axes in xla.sdy.meshes={text}"));
        }
        Ok(Mesh { axes })
    }

    pub fn device_count(&self) -> usize {
        self.axes.iter().map(|(_, s)| s).product()
    }

    pub(super) fn axis(&self, name: &str) -> Result<(usize, usize), ShardMapError> {
        self.axes
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| (i, self.axes[i].1))
            .ok_or_else(|| ShardMapError {
                message: format!(
                    "sharding names mesh axis \"{name}\", which the mesh does not have"
                ),
            })
    }

    /// The coordinate of `device` along axis `i` (devices are numbered row-major over the axes).
    pub(super) fn coordinate(&self, device: usize, i: usize) -> usize {
        let minor: usize = self.axes[i + 1..].iter().map(|(_, s)| s).product();
        (device / minor) % self.axes[i].1
    }
}

/// Per value, per dimension: the mesh axes that dimension is split over (major first).
pub type Sharding = Vec<Vec<String>>;

/// Parses `#sdy.sharding_per_value<[<@mesh, [{}, {"r"}]>, <@mesh, []>]>`.
pub(crate) fn parse_shardings(text: &str) -> Result<Vec<Sharding>, ShardMapError> {
    let text = text.replace('\\', "");
    let bad = |why: &str| ShardMapError {
        message: format!("cannot read sharding {text}: {why}"),
    };
    let start = text
        .find("sharding_per_value<[")
        .ok_or_else(|| bad("no sharding_per_value"))?;
    let mut s = &text[start + "sharding_per_value<[".len()..];
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if s.starts_with(']') {
            return Ok(out);
        }
        s = s.strip_prefix("<@").ok_or_else(|| bad("expected <@mesh"))?;
        let open = s.find('[').ok_or_else(|| bad("expected ["))?;
        s = &s[open + 1..];
        let mut dims = Vec::new();
        loop {
            s = s.trim_start_matches([' ', ',']);
            if let Some(rest) = s.strip_prefix(']') {
                s = rest;
                break;
            }
            s = s
                .strip_prefix('{')
                .ok_or_else(|| bad("expected { for a dimension"))?;
            let close = s.find('}').ok_or_else(|| bad("unclosed {"))?;
            let inner = &s[..close];
            let axes: Vec<String> = inner
                .split('"')
                .enumerate()
                .filter(|(i, _)| i % 2 == 1)
                .map(|(_, a)| a.to_string())
                .collect();
            dims.push(axes);
            s = &s[close + 1..];
        }
        let close = s.find('>').ok_or_else(|| bad("expected >"))?;
        s = &s[close + 1..];
        out.push(dims);
    }
}

/// The sharding attribute `key` of an instruction's frontend attributes.
pub(super) fn sharding_attr(
    module: &Module,
    id: InstrId,
    key: &str,
) -> Result<Vec<Sharding>, ShardMapError> {
    let instr = module.entry().get(id);
    let text = instr
        .extra_attrs
        .iter()
        .find_map(|(k, v)| {
            if k == key {
                Some(v.clone())
            } else {
                v.find(key).map(|i| v[i..].to_string())
            }
        })
        .ok_or_else(|| ShardMapError {
            message: format!("{} has no {key} attribute", instr.name),
        })?;
    parse_shardings(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard_map::blocks::Split;

    #[test]
    fn parses_shardings_with_escaped_quotes() {
        let s = parse_shardings(
            r#"#sdy.sharding_per_value<[<@mesh, [{}, {}]>, <@mesh, [{\"r\"}, {}]>, <@mesh, []>]>"#,
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                vec![vec![], vec![]],
                vec![vec!["r".to_string()], vec![]],
                vec![]
            ]
        );
    }

    #[test]
    fn two_axis_meshes_number_devices_row_major() {
        let mut m = Module::new("m");
        m.frontend_attributes.push((
            "xla.sdy.meshes".into(),
            r#"{mesh = #sdy.mesh<[\"x\"=2, \"y\"=3]>}"#.into(),
        ));
        let mesh = Mesh::of_module(&m).unwrap();
        assert_eq!(mesh.axes, vec![("x".to_string(), 2), ("y".to_string(), 3)]);
        assert_eq!(mesh.device_count(), 6);
        // Device 4 is (x=1, y=1); a dimension split over ("x", "y") has 6 pieces, piece 4.
        let sharding = vec![
            vec!["x".to_string(), "y".to_string()],
            vec!["y".to_string()],
        ];
        let split = Split {
            mesh: &mesh,
            sharding: &sharding,
        };
        assert_eq!(split.piece(0, 4).unwrap(), (6, 4));
        assert_eq!(split.piece(1, 4).unwrap(), (3, 1));
        let bad = vec![vec!["z".to_string()]];
        let split = Split {
            mesh: &mesh,
            sharding: &bad,
        };
        assert!(split.piece(0, 0).unwrap_err().message.contains("\"z\""));
    }

    #[test]
    fn a_module_without_a_mesh_is_explained() {
        let e = Mesh::of_module(&Module::new("m")).unwrap_err();
        assert!(e.message.contains("xla.sdy.meshes"), "{e}");
    }
}
