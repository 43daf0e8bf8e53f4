//! The global step between host and device: an i64 on the host (checkpoints, logs), an s32
//! scalar on the device (TPUs have no 64-bit values).
//!
//! Before each loop the estimator converts the host's step with [`device_global_step`],
//! which refuses a loop whose last iteration would take the step past `i32::MAX`
//! (2 147 483 647), rather than let the device's step wrap around.

/// A loop the device's s32 global step cannot count.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GlobalStepError {
    #[error("global step {step} is negative")]
    Negative { step: i64 },
    #[error(
        "global step {step} plus {iterations} iterations passes {}, the largest step the \
         device's 32-bit global step can hold (TPUs have no 64-bit values)",
        i32::MAX
    )]
    TooLarge { step: i64, iterations: u64 },
}

/// The device's s32 value of the host's `step`, checked so that `iterations` more steps
/// still fit.
pub fn device_global_step(step: i64, iterations: u64) -> Result<i32, GlobalStepError> {
    if step < 0 {
        return Err(GlobalStepError::Negative { step });
    }
    let last = i128::from(step) + i128::from(iterations);
    if last > i128::from(i32::MAX) {
        return Err(GlobalStepError::TooLarge { step, iterations });
    }
    Ok(step as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_up_to_i32_max_fit_and_beyond_are_refused() {
        assert_eq!(device_global_step(0, 100), Ok(0));
        assert_eq!(
            device_global_step(i32::MAX as i64 - 50, 50),
            Ok(i32::MAX - 50)
        );
        let err = device_global_step(i32::MAX as i64 - 50, 51).unwrap_err();
        assert_eq!(
            err.to_string(),
            "global step 2147483597 plus 51 iterations passes 2147483647, the largest step the \
             device's 32-bit global step can hold (TPUs have no 64-bit values)"
        );
        assert!(device_global_step(i64::MAX, u64::MAX).is_err());
        assert_eq!(
            device_global_step(-1, 1),
            Err(GlobalStepError::Negative { step: -1 })
        );
    }
}
