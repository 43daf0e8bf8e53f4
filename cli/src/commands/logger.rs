//! The command line's logger: the libraries' warnings (a skipped corrupt record, a dump that
//! could not be written) and the estimator's lines on stderr, as `WARNING:tessel:...`.

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn || (m.level() <= log::Level::Info && m.target() == "tessel")
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                log::Level::Error => "ERROR",
                log::Level::Warn => "WARNING",
                _ => "INFO",
            };
            eprintln!("{level}:{}:{}", record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger (once).
pub fn install() {
    static STDERR: Stderr = Stderr;
    if log::set_logger(&STDERR).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}
