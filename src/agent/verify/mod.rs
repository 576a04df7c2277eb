//! Verifying a repair with the project's tests: which command runs them
//! ([`detect_test_command`]), and what their output says
//! ([`parse_test_output`]): counts, failing tests, messages and the
//! workspace locations a model needs to repair.

mod detect;
mod frames;
mod parse;
mod report;
mod test_files;
mod trace;

pub use detect::{detect_test_command, DetectedTest};
pub use parse::parse_test_output;
pub use report::{Frame, TestReport};
pub use test_files::is_test_file;
pub use trace::{parse_trace, trace_error, TraceFrame};
