//! libFuzzer target: HLO text through parse, print and re-parse, verify, legality and (when
//! small) the interpreter on zero inputs. The checks are `tessel_tests::fuzz::check_hlo`, the
//! same as the fixed-seed mutation test in `tests/tests/fuzz/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Text that is not UTF-8 is the file reader's concern (covered by the mutation test).
    if let Ok(text) = std::str::from_utf8(data) {
        tessel_tests::fuzz::check_hlo(text);
    }
});
