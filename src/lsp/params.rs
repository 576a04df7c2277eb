//! Parameter shapes real clients send that tower-lsp would reject before a
//! handler sees them: `"params": null` (many clients' "no params"), a
//! missing `params` for our own methods whose fields are all optional
//! (tower-lsp answers "Missing params field"), and `executeCommand`'s
//! `arguments` as `null` or a bare object. Lua's `{}` reaches us as `[]`,
//! which the handlers accept themselves.

use serde_json::Value;
use tower_lsp::jsonrpc::Request;

/// Our methods that take no parameters or only optional ones.
const OPTIONAL_PARAMS: [&str; 1] = ["fettle/stats"];

/// The request as tower-lsp can route it.
pub fn normalize(req: Request) -> Request {
    let (method, id, mut params) = req.into_parts();
    if params.as_ref().is_some_and(Value::is_null) {
        params = None;
    }
    if params.is_none() && OPTIONAL_PARAMS.contains(&method.as_ref()) {
        params = Some(Value::Object(Default::default()));
    }
    if method == "workspace/executeCommand" {
        if let Some(Value::Object(fields)) = params.as_mut() {
            match fields.get("arguments") {
                Some(Value::Null) => {
                    fields.remove("arguments");
                }
                // One argument object sent without its array.
                Some(Value::Object(_)) => {
                    if let Some(arg) = fields.remove("arguments") {
                        fields.insert("arguments".to_owned(), Value::Array(vec![arg]));
                    }
                }
                _ => {}
            }
        }
    }
    let mut builder = Request::build(method);
    if let Some(id) = id {
        builder = builder.id(id);
    }
    if let Some(params) = params {
        builder = builder.params(params);
    }
    builder.finish()
}

/// "a string", "an array of 2 items"…: what a client sent, in words.
pub fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::String(_) => "a string".to_owned(),
        Value::Array(items) if items.is_empty() => "an empty array".to_owned(),
        Value::Array(items) => format!("an array of {} item(s)", items.len()),
        Value::Object(fields) if fields.is_empty() => "an empty object".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// True for what a client means as "nothing": null, `[]` (Lua's `{}`) and `{}`.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roundtrip(method: &'static str, params: Option<Value>) -> Option<Value> {
        let mut builder = Request::build(method).id(1);
        if let Some(params) = params {
            builder = builder.params(params);
        }
        normalize(builder.finish()).into_parts().2
    }

    #[test]
    fn shapes_tower_lsp_rejects_are_fixed() {
        assert_eq!(roundtrip("shutdown", Some(Value::Null)), None);
        assert_eq!(roundtrip("fettle/stats", None), Some(json!({})));
        assert_eq!(
            roundtrip("fettle/stats", Some(Value::Null)),
            Some(json!({}))
        );
        assert_eq!(roundtrip("fettle/stats", Some(json!([]))), Some(json!([])));
        assert_eq!(
            roundtrip(
                "workspace/executeCommand",
                Some(json!({"command": "fettle.undo", "arguments": null}))
            ),
            Some(json!({"command": "fettle.undo"}))
        );
        assert_eq!(
            roundtrip(
                "workspace/executeCommand",
                Some(json!({"command": "fettle.undo", "arguments": {"taskId": "t1"}}))
            ),
            Some(json!({"command": "fettle.undo", "arguments": [{"taskId": "t1"}]}))
        );
    }
}
