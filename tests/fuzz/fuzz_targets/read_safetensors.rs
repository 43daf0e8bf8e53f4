//! libFuzzer target: bytes read as a safetensors file by `tessel_runtime::host_io`, and what
//! reads written and read back unchanged (`tessel_tests::fuzz::check_safetensors`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // One scratch file per fuzzing process: libFuzzer runs inputs one at a time.
    let scratch =
        std::env::temp_dir().join(format!("tessel-fuzz-{}.safetensors", std::process::id()));
    tessel_tests::fuzz::check_safetensors(data, &scratch);
});
