//! Code more than one tool needs, kept here so that no tool reaches into another
//! tool's private modules: the approval gate for commands and scripts (terminal,
//! execute_code), the find-and-replace engine (patch, skill_manage), the skill
//! library (skills, cronjob) and where a given image comes from (vision_analyze,
//! image_generate).

pub mod command_approval;
pub mod find_replace;
pub mod image_source;
pub mod skills_library;
