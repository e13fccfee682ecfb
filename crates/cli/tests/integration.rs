//! The command line's integration tests, one binary: each module below is
//! one file of this directory. A binary per file linked kevo's whole
//! dependency tree 22 times and ran the files one after another; in one
//! binary the test threads share the work of all of them.

mod common;

mod agent_tools;
mod analyst;
mod asktell;
mod batch;
mod browser;
mod cli;
mod cmd_sandbox;
mod concurrency;
mod config;
mod cross;
mod devices;
mod distributed;
mod docs;
mod evolve;
mod evolving_prompts;
mod first_use;
mod golden;
mod hostile_endpoint;
mod install;
mod kernelbench;
mod llm_faults;
mod record;
mod report;
mod strategies;
mod sweep;
mod task_folder_links;
mod task_folders;
mod tool_mailbox;
mod trust;
mod tune;
mod what_a_user_sees;
