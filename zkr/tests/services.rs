//! `zkr services`: the instances a Rust `ServiceDiscovery` registered, as a table and as JSON
//! (Curator's fields, `enabled` included).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::time::Duration;

use common::fixtures::{bounded, plain_framework, shared_connect, unique_path, within};
use common::timing::{SESSION, SLOW_LIMIT as LIMIT};
use serde_json::{json, Value};
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};

async fn zkr(args: &[&str]) -> (i32, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"));
    command.args(args).env_remove("ZK_CONNECT").env_remove("ZK_DIGEST").stdin(Stdio::null()).kill_on_drop(true);
    let output = within(Duration::from_secs(90), "zkr to finish", command.output()).await.expect("running zkr");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn services_lists_registered_instances_as_a_table_and_json() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let base = unique_path("zkr-services", "list");
        let discovery: ServiceDiscovery =
            ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new().payload_class("java.util.LinkedHashMap"))
                .unwrap();
        for (name, id, port) in [("api", "a1", 8080), ("api", "a2", 8081), ("web", "w1", 80)] {
            let instance = ServiceInstance::new(name)
                .unwrap()
                .with_id(id)
                .unwrap()
                .with_address("10.0.0.9")
                .with_port(port)
                .unwrap()
                .with_payload(json!({"zone": "z1"}));
            discovery.register(&instance).await.unwrap();
        }

        let (code, out, err) = zkr(&["--connect", &connect, "services", "--base", &base]).await;
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NAME") && lines[0].contains("PAYLOAD"), "{out}");
        assert_eq!(lines.len(), 4, "{out}");
        assert!(lines[1].starts_with("api") && lines[1].contains("a1") && lines[1].contains("8080"), "{out}");
        assert!(lines[3].starts_with("web") && lines[3].contains("w1"), "{out}");

        let (code, out, err) = zkr(&["--connect", &connect, "services", "api", "--base", &base, "--json"]).await;
        assert_eq!(code, 0, "{err}");
        let json: Value = serde_json::from_str(&out).unwrap();
        let ids: Vec<&str> = json.as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["a1", "a2"]);
        assert_eq!(json[0]["payload"]["@class"], "java.util.LinkedHashMap");
        assert_eq!(json[0]["enabled"], true);
        assert_eq!(json[0]["port"], 8080);

        // An instance node that holds no instance's JSON is left out, and said so on stderr
        // (before, an all-corrupt service read as "no instances", silently).
        fw.create(&format!("{base}/web/broken")).data(b"{not json").await.unwrap();
        let (code, out, err) = zkr(&["--connect", &connect, "services", "web", "--base", &base]).await;
        assert_eq!(code, 0, "{err}");
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(err.contains(&format!("skipped {base}/web/broken")), "{err}");

        let (code, _, err) = zkr(&["--connect", &connect, "services", "--base", "no-slash"]).await;
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("path"), "{err}");
        // A base or a service that is not there is a missing path (exit 4), not "no instances".
        let (code, _, err) = zkr(&["--connect", &connect, "services", "--base", &format!("{base}-typo")]).await;
        assert_eq!(code, 4, "{err}");
        let (code, _, err) = zkr(&["--connect", &connect, "services", "nope", "--base", &base]).await;
        assert_eq!(code, 4, "{err}");

        // Strings from an instance's JSON reach the table with control characters escaped, and
        // a registration time from the far past shows an age, not an overflow.
        let hostile = json!({
            "name": "evil", "id": "e1", "address": "\u{1b}]0;pwned\u{7}\u{1b}[2J",
            "registrationTimeUTC": i64::MIN, "serviceType": "DYNAMIC",
            "payload": null, "port": null, "sslPort": null, "uriSpec": null
        });
        fw.create(&format!("{base}/evil")).data(b"").await.unwrap();
        fw.create(&format!("{base}/evil/e1")).data(hostile.to_string().as_bytes()).await.unwrap();
        let (code, out, err) = zkr(&["--connect", &connect, "services", "evil", "--base", &base]).await;
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("\\u{1b}]0;pwned"), "{out}");
        discovery.close().await.unwrap();
        fw.close().await;
    })
    .await;
}
