//! The plugin as shipped: help tags, `:checkhealth`, `packadd`.

use super::*;

/// `:help fettle` works without `:helptags`: the plugin ships its tags,
/// and they are those of its help file as it is.
#[test]
fn neovim_help_tags_are_shipped_and_current() {
    let Some(nvim) = nvim() else {
        assert!(
            std::env::var_os("FETTLE_REQUIRE_NVIM").is_none(),
            "FETTLE_REQUIRE_NVIM is set but Neovim was not found"
        );
        return;
    };
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/nvim/doc");
    let fresh = tempfile::tempdir().unwrap();
    std::fs::copy(doc.join("fettle.txt"), fresh.path().join("fettle.txt")).unwrap();
    let status = Command::new(nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u", "NONE", "-c"])
        .arg(format!("helptags {}", fresh.path().display()))
        .args(["-c", "qa!"])
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let shipped = std::fs::read_to_string(doc.join("tags")).unwrap_or_default();
    let current = std::fs::read_to_string(fresh.path().join("tags")).unwrap();
    assert_eq!(
        shipped, current,
        "editors/nvim/doc/tags is stale: run `nvim --headless -u NONE -c 'helptags editors/nvim/doc' -c q`"
    );
}

/// `:checkhealth fettle` names the binary and its version, the attached
/// server and its encoding.
#[test]
fn neovim_checkhealth_reports_the_binary_and_the_server() {
    // The user's configuration names the mock model for everything, so
    // `fettle doctor` has one model to probe.
    let mock = crate::e2e::harness::BackgroundMock::start(fettle::mock::Script::new(vec![{
        let mut answer = fettle::mock::ScriptedResponse::text("return a + b");
        answer.repeat = true;
        answer
    }]));
    let user_config = format!(
        "[models.mock]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock\"\nmax_retries = 0\n\n[completion]\nmodel = \"mock\"\n[edit]\nmodel = \"mock\"\n[agent]\nmodel = \"mock\"\n",
        mock.server.url()
    );
    let ws = Workspace::new(&[
        ("shop.py", SHOP_PY),
        (".no-config/fettle/config.toml", &user_config),
    ]);
    let Some((value, _log)) = run_plugin_fixture("health.lua", &ws, "shop.py", &[]) else {
        return;
    };
    let report: Vec<&str> = value["report"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let has = |needle: &str| report.iter().any(|l| l.contains(needle));
    assert!(
        has(&format!("fettle {}", env!("CARGO_PKG_VERSION"))),
        "{report:#?}"
    );
    assert!(
        has("attached (client") && has("position encoding utf-"),
        "{report:#?}"
    );
    // Ghost text: the plugin's renderer on 0.11, on.
    assert!(has("on: the plugin's renderer"), "{report:#?}");
    // `fettle doctor` probed the mock model, which answered.
    assert!(
        has("mock (openai, used by completion, edit, agent)"),
        "{report:#?}"
    );
    assert!(
        report
            .iter()
            .any(|l| l.contains("OK") && l.contains("answered \"return a + b\"")),
        "{report:#?}"
    );
    assert!(!report.iter().any(|l| l.contains("ERROR")), "{report:#?}");
}

/// Without a plugin manager: the folder as `pack/*/opt/fettle`, then
/// `:packadd fettle` and `setup()`; the command exists and the server
/// attaches.
#[test]
fn neovim_plugin_loads_with_packadd() {
    let ws = Workspace::new(&[("shop.py", SHOP_PY)]);
    let pack = tempfile::tempdir().unwrap();
    let opt = pack.path().join("pack/test/opt");
    std::fs::create_dir_all(&opt).unwrap();
    std::os::unix::fs::symlink(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("editors/nvim"),
        opt.join("fettle"),
    )
    .unwrap();
    let pack_path = pack.path().to_str().unwrap().to_owned();
    let Some((value, _log)) = run_plugin_fixture(
        "packadd.lua",
        &ws,
        "shop.py",
        &[("FETTLE_PACK", &pack_path)],
    ) else {
        return;
    };
    assert_eq!(value["before"], 0, "{value:#}");
    assert_eq!(value["command"], 2, "{value:#}");
    assert_eq!(value["help"], true, "{value:#}");
    assert_eq!(value["attached"], true, "{value:#}");
}
