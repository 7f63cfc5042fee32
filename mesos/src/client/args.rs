//! The flags of a client of a Mesos master, declared once: where the master
//! is (`--master`) and the CA its certificate must chain to (`--ca-file`).
//! `mpiswarm controller` flattens [`MasterArgs`] into its flags
//! (`#[command(flatten)]`), `mpiswarm agent` flattens [`AgentMasterArgs`]:
//! the same flags in the agent's words (its environment variables are all
//! `MPISWARM_AGENT_*`, and it registers with the master). Each program keeps
//! its own credential flags.
//!
//! It parses only: it opens no connection, and reads a file only in
//! [`MasterArgs::ca`].

use std::ops::Deref;
use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches};

use crate::tls::{CaFile, TlsError};

/// The master a client talks to when no `--master` is given: the offer
/// layer on this machine.
pub const DEFAULT_MASTER: &str = "http://127.0.0.1:5050";

/// `--master` and `--ca-file`, as `mpiswarm controller` takes them.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct MasterArgs {
    /// The Mesos master (our offer layer, or a real Mesos master).
    #[arg(long = "master", id = "master", value_name = "MASTER", env = "MPISWARM_MASTER", default_value = DEFAULT_MASTER)]
    pub url: String,
    /// PEM CA certificate(s) to trust for an https --master (instead of the public roots).
    #[arg(long, env = "MPISWARM_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

impl MasterArgs {
    /// The CAs of `--ca-file`, read (`None`: the public roots).
    pub fn ca(&self) -> Result<Option<CaFile>, TlsError> {
        self.ca_file.as_deref().map(CaFile::read).transpose()
    }
}

/// [`MasterArgs`] as `mpiswarm agent` takes them: `--ca-file` from
/// `MPISWARM_AGENT_CA_FILE`, and `--master` described as the master it
/// registers with.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMasterArgs(pub MasterArgs);

impl AgentMasterArgs {
    /// The agent's words for the flags [`MasterArgs`] declares.
    fn reworded(command: Command) -> Command {
        command
            .mut_arg("master", |a| a.help("The offer layer (or Mesos-compatible master) to register with"))
            .mut_arg("ca_file", |a| a.env("MPISWARM_AGENT_CA_FILE"))
    }
}

impl Deref for AgentMasterArgs {
    type Target = MasterArgs;

    fn deref(&self) -> &MasterArgs {
        &self.0
    }
}

impl FromArgMatches for AgentMasterArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        MasterArgs::from_arg_matches(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl Args for AgentMasterArgs {
    fn augment_args(command: Command) -> Command {
        Self::reworded(MasterArgs::augment_args(command))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::reworded(MasterArgs::augment_args_for_update(command))
    }

    fn group_id() -> Option<clap::Id> {
        MasterArgs::group_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Controller {
        #[command(flatten)]
        master: MasterArgs,
    }

    #[derive(Parser)]
    struct Agent {
        #[command(flatten)]
        master: AgentMasterArgs,
    }

    /// (env, help) of flag `id` as `C` declares it (clap drops the final
    /// period of a one-line doc comment, as `--help` has always shown it).
    fn declared<C: clap::CommandFactory>(id: &str) -> (Option<String>, Option<String>) {
        let command = C::command();
        let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap_or_else(|| panic!("no flag {id}"));
        (arg.get_env().map(|e| e.to_string_lossy().into_owned()), arg.get_help().map(|h| h.to_string()))
    }

    #[test]
    fn the_controller_and_the_agent_take_the_same_flags_each_under_its_own_variables_and_words() {
        let controller = Controller::parse_from(["controller", "--master", "https://m:5050", "--ca-file", "/ca.pem"]);
        let agent = Agent::parse_from(["agent", "--master", "https://m:5050", "--ca-file", "/ca.pem"]);
        assert_eq!(controller.master, *agent.master);
        assert_eq!(
            (controller.master.url.as_str(), controller.master.ca_file),
            ("https://m:5050", Some("/ca.pem".into()))
        );

        assert_eq!(
            declared::<Controller>("master"),
            (Some("MPISWARM_MASTER".into()), Some("The Mesos master (our offer layer, or a real Mesos master)".into()))
        );
        assert_eq!(
            declared::<Agent>("master"),
            (
                Some("MPISWARM_MASTER".into()),
                Some("The offer layer (or Mesos-compatible master) to register with".into())
            )
        );
        let ca_help = Some("PEM CA certificate(s) to trust for an https --master (instead of the public roots)".into());
        assert_eq!(declared::<Controller>("ca_file"), (Some("MPISWARM_CA_FILE".into()), ca_help.clone()));
        assert_eq!(declared::<Agent>("ca_file"), (Some("MPISWARM_AGENT_CA_FILE".into()), ca_help));
    }

    #[test]
    fn without_flags_the_master_is_the_local_offer_layer_and_the_public_roots_are_trusted() {
        let command = Controller::command();
        let defaults = command.get_arguments().find(|a| a.get_id() == "master").unwrap().get_default_values();
        assert_eq!(defaults, [DEFAULT_MASTER]);
        let args = MasterArgs { url: DEFAULT_MASTER.into(), ca_file: None };
        assert!(args.ca().unwrap().is_none());
        let missing = MasterArgs { ca_file: Some("/nonexistent/ca.pem".into()), ..args };
        let err = missing.ca().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.pem"), "the error names the file: {err}");
    }
}
