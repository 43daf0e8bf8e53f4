//! TF_CONFIG's JSON to a [`TfConfig`], checked as TF's `RunConfig` checks it
//! (`_validate_task_type_and_task_id`, local mode's rules, `_get_model_dir`).

use super::{ClusterSpec, TaskType, TfConfig, TfConfigError};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(super) fn parse(text: &str) -> Result<TfConfig, TfConfigError> {
    let json: Value = serde_json::from_str(text).map_err(|e| json_error(text, &e))?;
    let top = object(&json, "TF_CONFIG itself")?;
    let cluster = match top.get("cluster") {
        None | Some(Value::Null) => ClusterSpec::default(),
        Some(v) => cluster(v)?,
    };
    let empty = Map::new();
    let task = match top.get("task") {
        None | Some(Value::Null) => &empty,
        Some(v) => object(v, "\"task\"")?,
    };
    let task_type = match task.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => {
            Some(
                TaskType::from_name(s).ok_or_else(|| TfConfigError::UnknownTaskType {
                    name: s.clone(),
                    place: "task",
                })?,
            )
        }
        Some(other) => {
            return Err(TfConfigError::UnknownTaskType {
                name: other.to_string(),
                place: "task",
            })
        }
    };
    let task_id = match task.get("index") {
        None | Some(Value::Null) => None,
        Some(v) => Some(index(v)?),
    };
    let model_dir = match top.get("model_dir") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => return Err(TfConfigError::EmptyModelDir),
        Some(Value::String(s)) => Some(PathBuf::from(s)),
        Some(other) => {
            return Err(TfConfigError::ModelDirNotAString {
                found: other.to_string(),
            })
        }
    };
    let ps = cluster.job_tasks(TaskType::Ps).len();
    if ps > 0 || task_type == Some(TaskType::Ps) {
        let what = if ps > 0 {
            format!("a \"ps\" job of {ps} in the cluster")
        } else {
            "this process's task is \"ps\"".to_string()
        };
        return Err(TfConfigError::ParameterServers { what });
    }
    let (task_type, task_id) = if cluster.is_empty() {
        local_task(task_type, task_id)?
    } else {
        cluster_task(&cluster, task_type, task_id)?
    };
    Ok(TfConfig {
        cluster,
        task_type,
        task_id,
        model_dir,
    })
}

/// Without a cluster, TF allows only worker 0 (the defaults).
fn local_task(
    task_type: Option<TaskType>,
    task_id: Option<usize>,
) -> Result<(TaskType, usize), TfConfigError> {
    let task_type = task_type.unwrap_or(TaskType::Worker);
    let task_id = task_id.unwrap_or(0);
    if task_type != TaskType::Worker {
        return Err(TfConfigError::LocalNotWorker {
            task_type: task_type.name().to_string(),
        });
    }
    if task_id != 0 {
        return Err(TfConfigError::LocalIndexNotZero { index: task_id });
    }
    Ok((task_type, task_id))
}

/// TF's `_validate_task_type_and_task_id`, with `master` as the chief of a legacy cluster.
fn cluster_task(
    cluster: &ClusterSpec,
    task_type: Option<TaskType>,
    task_id: Option<usize>,
) -> Result<(TaskType, usize), TfConfigError> {
    let has = |t| !cluster.job_tasks(t).is_empty();
    let chief = if has(TaskType::Master) {
        if has(TaskType::Chief) {
            return Err(TfConfigError::ChiefAndMaster);
        }
        TaskType::Master
    } else {
        TaskType::Chief
    };
    let chiefs = cluster.job_tasks(chief).len();
    if chiefs == 0 {
        let workers = cluster.job_tasks(TaskType::Worker);
        let hint = match workers.split_first() {
            Some((first, rest)) => format!(
                " It has {} worker(s) and no chief: make the first the chief, e.g. \"cluster\": {{\"chief\": [\"{first}\"], \"worker\": {}}}, its task {{\"type\": \"chief\", \"index\": 0}}.",
                workers.len(),
                Value::from(rest.to_vec())
            ),
            None => String::new(),
        };
        return Err(TfConfigError::NoChief {
            chief: chief.name(),
            workers: hint,
        });
    }
    if chiefs > 1 {
        return Err(TfConfigError::ManyChiefs {
            chief: chief.name(),
            count: chiefs,
        });
    }
    let task_type = task_type.ok_or(TfConfigError::NoTaskType)?;
    let task_id = task_id.ok_or(TfConfigError::NoTaskIndex)?;
    // The evaluator is not part of the training cluster: its index has no bound.
    if task_type == TaskType::Evaluator {
        if chief == TaskType::Master {
            return Err(TfConfigError::EvaluatorWithMaster);
        }
        return Ok((task_type, task_id));
    }
    let tasks = cluster.job_tasks(task_type);
    if tasks.is_empty() {
        return Err(TfConfigError::TaskTypeNotInCluster {
            task_type: task_type.name().to_string(),
            cluster: cluster.to_string(),
        });
    }
    if task_id >= tasks.len() {
        return Err(TfConfigError::IndexOutOfRange {
            index: task_id,
            task_type: task_type.name().to_string(),
            cluster: cluster.to_string(),
        });
    }
    Ok((task_type, task_id))
}

fn cluster(v: &Value) -> Result<ClusterSpec, TfConfigError> {
    let mut jobs = BTreeMap::new();
    for (name, tasks) in object(v, "\"cluster\"")? {
        let task_type =
            TaskType::from_name(name).ok_or_else(|| TfConfigError::UnknownTaskType {
                name: name.clone(),
                place: "cluster",
            })?;
        let not_a_list = || TfConfigError::JobNotAList {
            job: name.clone(),
            found: tasks.to_string(),
        };
        let addresses = tasks
            .as_array()
            .ok_or_else(not_a_list)?
            .iter()
            .map(|a| a.as_str().map(str::to_string).ok_or_else(not_a_list))
            .collect::<Result<Vec<_>, _>>()?;
        // An empty job is no job (TF would find no task in it either).
        if !addresses.is_empty() {
            jobs.insert(task_type, addresses);
        }
    }
    Ok(ClusterSpec { jobs })
}

/// A task index: a non-negative integer, or one written as a string (TF calls `int()`).
fn index(v: &Value) -> Result<usize, TfConfigError> {
    let parsed = match v {
        Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<usize>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| TfConfigError::BadTaskIndex {
        found: v.to_string(),
    })
}

fn object<'v>(v: &'v Value, what: &str) -> Result<&'v Map<String, Value>, TfConfigError> {
    v.as_object().ok_or_else(|| TfConfigError::NotAnObject {
        what: what.to_string(),
        found: v.to_string(),
    })
}

/// serde_json's line and column, with the byte offset they point at.
fn json_error(text: &str, e: &serde_json::Error) -> TfConfigError {
    let (line, column) = (e.line(), e.column());
    let before: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let message = e.to_string();
    // serde_json appends " at line L column C"; the offset says it already.
    let message = match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    TfConfigError::Json {
        offset: before + column.saturating_sub(1),
        line,
        column,
        message,
    }
}
