//! Real files and block devices (`file:PATH`). Built in the foundation issue.
