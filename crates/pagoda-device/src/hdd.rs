//! Emulated hard disk (`hdd-15k`). Built in the foundation issue.
