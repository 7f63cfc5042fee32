//! The flags of a client of a Mesos master, declared once: where the master
//! is (`--master`), the CA its certificate must chain to (`--ca-file`), and
//! the credential the client proves itself with ([`CredentialArgs`]).
//! `mpiswarm controller` flattens [`MasterArgs`] into its flags
//! (`#[command(flatten)]`), `mpiswarm agent` flattens [`AgentMasterArgs`]
//! and [`AgentCredentialArgs`]: the same flags in the agent's words (its
//! environment variables are all `MPISWARM_AGENT_*`, and it registers with
//! the master; [`Reworded`]).
//!
//! It parses only: it opens no connection, and reads files only in
//! [`MasterArgs::ca`] and [`CredentialArgs::read`].
use std::ops::Deref;
use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches};

use crate::credential::{Credential, CredentialError};
use crate::tls::{CaFile, TlsError};

/// The master a client talks to when no `--master` is given: the offer
/// layer on this machine.
pub const DEFAULT_MASTER: &str = "http://127.0.0.1:5050";

/// `--master` and `--ca-file`, as `mpiswarm controller` takes them.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct MasterArgs {
    /// The Mesos master (our offer layer, or a real Mesos master); an offer layer's replicas separated by commas, tried in turn.
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

/// A flag group declared once and shown by another program in its own
/// words: the same fields, other help texts or environment variables.
pub trait Wording {
    /// The flags, as declared once.
    type Args: Args + FromArgMatches;
    /// Changes only what `--help` shows and where the environment is read.
    fn reword(command: Command) -> Command;
}

/// `W::Args` under `W`'s wording: `#[command(flatten)]` it, then read the
/// fields through `Deref`.
pub struct Reworded<W: Wording>(pub W::Args);

impl<W: Wording> Deref for Reworded<W> {
    type Target = W::Args;

    fn deref(&self) -> &W::Args {
        &self.0
    }
}

impl<W: Wording> std::fmt::Debug for Reworded<W>
where
    W::Args: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<W: Wording> Clone for Reworded<W>
where
    W::Args: Clone,
{
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<W: Wording> PartialEq for Reworded<W>
where
    W::Args: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<W: Wording> FromArgMatches for Reworded<W> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        W::Args::from_arg_matches(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl<W: Wording> Args for Reworded<W> {
    fn augment_args(command: Command) -> Command {
        W::reword(W::Args::augment_args(command))
    }

    fn augment_args_for_update(command: Command) -> Command {
        W::reword(W::Args::augment_args_for_update(command))
    }

    fn group_id() -> Option<clap::Id> {
        W::Args::group_id()
    }
}

/// The agent's words for [`MasterArgs`]: `--ca-file` from
/// `MPISWARM_AGENT_CA_FILE`, and `--master` described as the master it
/// registers with.
pub struct AgentMaster;

impl Wording for AgentMaster {
    type Args = MasterArgs;

    fn reword(command: Command) -> Command {
        command
            .mut_arg("master", |a| a.help("The offer layer (or Mesos-compatible master) to register with; its replicas separated by commas, tried in turn"))
            .mut_arg("ca_file", |a| a.env("MPISWARM_AGENT_CA_FILE"))
    }
}

/// [`MasterArgs`] as `mpiswarm agent` takes them.
pub type AgentMasterArgs = Reworded<AgentMaster>;

/// How a client proves who it is to a master (and to agents): HTTP basic
/// authentication from `--principal` with `--secret-file`, or from a Mesos
/// credential file (`--credential`).
#[derive(Args, Debug, Clone, PartialEq, Default)]
pub struct CredentialArgs {
    /// Principal to authenticate as (HTTP basic, with --secret-file).
    #[arg(long, env = "MPISWARM_PRINCIPAL")]
    pub principal: Option<String>,
    /// File holding the principal's secret (e.g. a mounted Secret).
    #[arg(long, env = "MPISWARM_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// A Mesos credential file instead of --principal/--secret-file:
    /// `{"principal":"...","secret":"..."}` or `PRINCIPAL SECRET`.
    #[arg(long, env = "MPISWARM_CREDENTIAL", conflicts_with_all = ["principal", "secret_file"])]
    pub credential: Option<PathBuf>,
}

impl CredentialArgs {
    /// The credential the flags name, its files read (`None`: no flag given).
    pub fn read(&self) -> Result<Option<Credential>, CredentialError> {
        Credential::from_flags(self.principal.as_deref(), self.secret_file.as_deref(), self.credential.as_deref())
    }
}

/// The agent's words for [`CredentialArgs`]: its variables are
/// `MPISWARM_AGENT_*`, and the secret usually comes as a Docker secret.
pub struct AgentCredential;

impl Wording for AgentCredential {
    type Args = CredentialArgs;

    fn reword(command: Command) -> Command {
        command
            .mut_arg("principal", |a| {
                a.env("MPISWARM_AGENT_PRINCIPAL")
                    .help("Principal to authenticate as to the master (HTTP basic, with --secret-file)")
            })
            .mut_arg("secret_file", |a| {
                a.env("MPISWARM_AGENT_SECRET_FILE")
                    .help("File holding the principal's secret (e.g. a Docker secret in /run/secrets)")
            })
            .mut_arg("credential", |a| a.env("MPISWARM_AGENT_CREDENTIAL"))
    }
}

/// [`CredentialArgs`] as `mpiswarm agent` takes them.
pub type AgentCredentialArgs = Reworded<AgentCredential>;

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
        #[command(flatten)]
        credential: AgentCredentialArgs,
    }

    /// A client in the plain words: `MPISWARM_*` variables.
    #[derive(Parser)]
    struct Client {
        #[command(flatten)]
        credential: CredentialArgs,
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
            (Some("MPISWARM_MASTER".into()), Some("The Mesos master (our offer layer, or a real Mesos master); an offer layer's replicas separated by commas, tried in turn".into()))
        );
        assert_eq!(
            declared::<Agent>("master"),
            (
                Some("MPISWARM_MASTER".into()),
                Some("The offer layer (or Mesos-compatible master) to register with; its replicas separated by commas, tried in turn".into())
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

    #[test]
    fn the_agent_and_a_plain_client_take_the_same_credential_flags_each_under_its_own_variables() {
        for (flag, env) in [("principal", "PRINCIPAL"), ("secret_file", "SECRET_FILE"), ("credential", "CREDENTIAL")] {
            assert_eq!(declared::<Client>(flag).0, Some(format!("MPISWARM_{env}")), "{flag}");
            assert_eq!(declared::<Agent>(flag).0, Some(format!("MPISWARM_AGENT_{env}")), "{flag}");
        }
        let client = Client::parse_from(["client", "--principal", "p", "--secret-file", "/s"]);
        let agent = Agent::parse_from(["agent", "--principal", "p", "--secret-file", "/s"]);
        assert_eq!(client.credential, *agent.credential);
        for both in [["--credential", "/c", "--principal", "p"], ["--credential", "/c", "--secret-file", "/s"]] {
            let err = Agent::try_parse_from(["agent"].into_iter().chain(both)).err().expect("refused");
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict, "{both:?}: {err}");
        }
        assert!(CredentialArgs::default().read().unwrap().is_none(), "no flag, no credential");
    }
}
