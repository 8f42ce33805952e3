//! `zkr revoke <node>`: Curator's revocation request.

use zk_recipes::zk::Error as ZkError;
use zk_recipes::Framework;

use crate::connect::Options;
use crate::exit::Failure;

/// Curator's revocation message: these exact ten ASCII bytes, written as the lock node's data.
/// A holder that made its lock revocable compares the node's data with them byte for byte.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lock node to revoke, e.g. /locks/orders/_c_<uuid>-lock-0000000003 (`zkr locks` lists them)
    node: String,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let connect = options.connect_string();
    zk_recipes::path::validate_recipe_path(&args.node)
        .map_err(|e| Failure::from_error(e, "checking the node path", connect))?;
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

/// Asks the holder of `node` to release it, as Curator's `Revoker.attemptRevoke`: writes
/// [`REVOKE_MESSAGE`] to the node whatever its version. Returns `false` when the node does not
/// exist (its holder is already gone), which Curator does not count as an error either.
pub async fn attempt_revoke(framework: &Framework, node: &str) -> zk_recipes::Result<bool> {
    match framework.set_data(node, REVOKE_MESSAGE).await {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.zk(), Some(ZkError::NoNode)) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_is_curators_ten_bytes() {
        assert_eq!(super::REVOKE_MESSAGE, [0x5F, 0x5F, 0x52, 0x45, 0x56, 0x4F, 0x4B, 0x45, 0x5F, 0x5F]);
    }
}
