//! `infeed` and `outfeed` as the interpreter evaluates them: the value comes from (or goes to)
//! the run's [`ReplicaLink`], which reaches the host's queues; here only the shapes are
//! checked and the token is added.

use super::replica_link::ReplicaLink;
use super::{err, EvalResult};
use crate::ir::{Literal, Shape};

pub(crate) fn infeed(link: &dyn ReplicaLink, shape: &Shape) -> EvalResult<Literal> {
    let data_shape = match shape.as_tuple() {
        Some([data, Shape::Token]) => data,
        _ => {
            return err(format!(
                "infeed must give (data, token[]), the instruction says {}",
                shape.to_text(false)
            ))
        }
    };
    let value = link.infeed(data_shape)?;
    if !super::shapes_match(&value.shape(), data_shape) {
        return err(format!(
            "the host fed {} to an infeed of {}",
            value.shape().to_text(false),
            data_shape.to_text(false)
        ));
    }
    Ok(Literal::Tuple(vec![value, Literal::Token]))
}

pub(crate) fn outfeed(link: &dyn ReplicaLink, value: &Literal) -> EvalResult<Literal> {
    link.outfeed(value.clone())?;
    Ok(Literal::Token)
}
