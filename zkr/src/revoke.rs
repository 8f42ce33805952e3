//! `zkr revoke <node>`: Curator's revocation request.

use zk_recipes::{Framework, Revoker};

use crate::connect::Options;
use crate::exit::Failure;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lock node to revoke, e.g. /locks/orders/_c_<uuid>-lock-0000000003 (`zkr locks` lists them)
    node: String,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    // A bad path or a node that is no lock node is refused before connecting.
    Revoker::check_node_path(&args.node).map_err(|e| Failure::from_error(e, "checking the node path", connect))?;
    let framework = options.build(connect)?;
    options.start(&framework, connect).await?;
    let outcome = attempt_revoke(&framework, &args.node).await;
    framework.close().await;
    match outcome {
        Ok(true) => {
            println!("revocation requested: {}", args.node);
            Ok(())
        }
        Ok(false) => {
            println!("{} does not exist: nothing to revoke", args.node);
            Ok(())
        }
        Err(e) => Err(Failure::from_error(e, &format!("revoking {}", args.node), connect)),
    }
}

/// Asks the holder of `node` to release it with the library's
/// [`Revoker::attempt_revoke`](zk_recipes::Revoker::attempt_revoke) (Curator's
/// `Revoker.attemptRevoke`: the ten bytes `__REVOKE__` written whatever the node's version). Returns
/// `false` when the node does not exist (its holder is already gone), which Curator does not
/// count as an error either.
pub async fn attempt_revoke(framework: &Framework, node: &str) -> zk_recipes::Result<bool> {
    if framework.exists(node).await?.is_none() {
        return Ok(false);
    }
    Revoker::attempt_revoke(framework, node).await?;
    Ok(true)
}
