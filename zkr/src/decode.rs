//! How `zkr` names what the library's protocol decoder ([`zk_recipes::protocol`]) found: the
//! serialized form of its recipes, roles and kinds in `--json`. Which recipe a directory is,
//! its order and who holds are the protocol module's.

use serde::Serializer;
use zk_recipes::protocol::{Kind, Recipe, Role};

/// A recipe as `--json` writes it: its layout's identifier (`mutex`, `read-write`, ...).
pub fn recipe<S: Serializer>(recipe: &Recipe, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(recipe.id())
}

/// A role as `--json` writes it (`holder`, `waiter`, `lease`).
pub fn role<S: Serializer>(role: &Role, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(role.id())
}

/// A kind as `--json` writes it (`lock`, `lease`, `latch`, `read`, `write`, `foreign`).
pub fn kind<S: Serializer>(kind: &Kind, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(kind.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_are_the_protocol_ids() {
        #[derive(serde::Serialize)]
        struct Row {
            #[serde(serialize_with = "recipe")]
            recipe: Recipe,
            #[serde(serialize_with = "role")]
            role: Role,
            #[serde(serialize_with = "kind")]
            kind: Kind,
        }
        let row = Row { recipe: Recipe::ReadWrite, role: Role::Waiter, kind: Kind::Write };
        assert_eq!(serde_json::to_string(&row).unwrap(), r#"{"recipe":"read-write","role":"waiter","kind":"write"}"#);
    }
}
