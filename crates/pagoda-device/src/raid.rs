//! RAID-0 striping over N devices (`raid0-8x-hdd-15k`). Built in the foundation issue.
