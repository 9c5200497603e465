//! `.kwin/` next to the plan: kept as a path for code written against it; everything lives
//! in [`crate::fs`].

pub use crate::fs::{
    new_run_id, private_dir, private_file_new, rfc3339, temp_beside, unix_ms, write_private,
};
