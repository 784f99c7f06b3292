//! Code more than one tool needs, kept here so that no tool reaches into another
//! tool's private modules: the approval gate for commands and scripts (terminal,
//! execute_code), the find-and-replace engine (patch, skill_manage), the skill
//! library (skills, cronjob), where a given image comes from (vision_analyze,
//! image_generate) and a running program's output as progress (terminal, execute_code).

pub mod command_approval;
pub mod find_replace;
pub mod image_source;
pub mod live_output;
pub mod skills_library;
