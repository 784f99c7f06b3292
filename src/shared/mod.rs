//! Code more than one tool needs, kept here so that no tool reaches into another
//! tool's private modules: the approval gate for commands and scripts (terminal,
//! execute_code), the find-and-replace engine (patch, skill_manage) and the skill
//! library (skills, cronjob).

pub mod command_approval;
pub mod find_replace;
pub mod skills_library;
