//! The protobuf form of `/openapi/v2`, which client-go asks for first
//! (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
//! and parses as gnostic's `openapi.v2.Document` (gnostic-models,
//! `openapiv2/OpenAPIv2.proto`; the field numbers below are that file's).
//! It is built from the Swagger 2.0 JSON the way kube-openapi builds it
//! (`openapi_v2.ParseDocument`, then `proto.Marshal`): a JSON object of named
//! things becomes a list of `Named*` pairs in key order, `x-` keys become
//! vendor extensions, and free-form values (`default`, `enum`, `example`,
//! extension values) become YAML text in `Any.yaml`, which is what
//! kube-openapi's `util/proto` reads back.
//!
//! Only the messages and fields this server's documents use are declared
//! (a reader skips what is absent); nothing here decodes, and nothing here
//! decides what the document says (that is `openapi` and `openapi_v2`).

use prost::Message;
use serde_json::{Map, Value};

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "16")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(message, repeated, tag = "7")]
    vendor_extension: Vec<NamedAny>,
}

/// A free-form value; gnostic keeps it as YAML text.
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(oneof = "AdditionalProperties", tags = "1, 2")]
    oneof: Option<AdditionalProperties>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum AdditionalProperties {
    #[prost(message, tag = "1")]
    Schema(Box<Schema>),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, Message)]
struct ExternalDocs {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    url: String,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "6")]
    multiple_of: f64,
    #[prost(double, tag = "7")]
    maximum: f64,
    #[prost(bool, tag = "8")]
    exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    minimum: f64,
    #[prost(bool, tag = "10")]
    exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    max_length: i64,
    #[prost(int64, tag = "12")]
    min_length: i64,
    #[prost(string, tag = "13")]
    pattern: String,
    #[prost(int64, tag = "14")]
    max_items: i64,
    #[prost(int64, tag = "15")]
    min_items: i64,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(int64, tag = "17")]
    max_properties: i64,
    #[prost(int64, tag = "18")]
    min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(string, tag = "26")]
    discriminator: String,
    #[prost(bool, tag = "27")]
    read_only: bool,
    #[prost(message, optional, tag = "29")]
    external_docs: Option<ExternalDocs>,
    #[prost(message, optional, tag = "30")]
    example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "1")]
    vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    #[prost(string, repeated, tag = "1")]
    tags: Vec<String>,
    #[prost(string, tag = "2")]
    summary: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "6")]
    produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(bool, tag = "11")]
    deprecated: bool,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

/// `ParametersItem` (field 1, `Parameter`) and `Parameter` (a body
/// parameter is field 1, the others are field 2, `NonBodyParameter`).
#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    parameter: Option<Parameter>,
}

#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(oneof = "ParameterKind", tags = "1, 2")]
    oneof: Option<ParameterKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum ParameterKind {
    #[prost(message, tag = "1")]
    Body(BodyParameter),
    #[prost(message, tag = "2")]
    NonBody(NonBodyParameter),
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
}

/// `NonBodyParameter`: which sub-schema field holds the parameter says
/// where it goes. Header and path parameters share one field layout, query
/// and form-data parameters another.
#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(oneof = "NonBodyKind", tags = "1, 2, 3, 4")]
    oneof: Option<NonBodyKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum NonBodyKind {
    #[prost(message, tag = "1")]
    Header(HeaderOrPathParameter),
    #[prost(message, tag = "2")]
    FormData(QueryOrFormDataParameter),
    #[prost(message, tag = "3")]
    Query(QueryOrFormDataParameter),
    #[prost(message, tag = "4")]
    Path(HeaderOrPathParameter),
}

/// `QueryParameterSubSchema` and `FormDataParameterSubSchema`.
#[derive(Clone, PartialEq, Message)]
struct QueryOrFormDataParameter {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "6")]
    r#type: String,
    #[prost(string, tag = "7")]
    format: String,
    #[prost(message, optional, tag = "10")]
    default: Option<Any>,
    #[prost(bool, tag = "20")]
    unique_items: bool,
    #[prost(message, repeated, tag = "21")]
    r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "23")]
    vendor_extension: Vec<NamedAny>,
}

/// `HeaderParameterSubSchema` and `PathParameterSubSchema`.
#[derive(Clone, PartialEq, Message)]
struct HeaderOrPathParameter {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "5")]
    r#type: String,
    #[prost(string, tag = "6")]
    format: String,
    #[prost(message, optional, tag = "9")]
    default: Option<Any>,
    #[prost(bool, tag = "19")]
    unique_items: bool,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, repeated, tag = "22")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    vendor_extension: Vec<NamedAny>,
}

/// `NamedResponseValue` whose `ResponseValue` holds a `Response` (field 1).
#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
    #[prost(message, repeated, tag = "5")]
    vendor_extension: Vec<NamedAny>,
}

/// `SchemaItem` holding a `Schema` (field 1).
#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

/// The protobuf bytes of a Swagger 2.0 document.
pub fn encode(doc: &Value) -> Vec<u8> {
    let info = &doc["info"];
    Document {
        swagger: text(doc, "swagger"),
        info: info.is_object().then(|| Info {
            title: text(info, "title"),
            version: text(info, "version"),
            description: text(info, "description"),
            vendor_extension: extensions(info),
        }),
        paths: doc.get("paths").map(|p| Paths {
            vendor_extension: extensions(p),
            path: named(p, |name, item| NamedPathItem { name, value: Some(path_item(item)) }),
        }),
        definitions: doc.get("definitions").map(|d| Definitions {
            additional_properties: named(d, |name, s| NamedSchema { name, value: Some(schema(s)) }),
        }),
        vendor_extension: extensions(doc),
    }
    .encode_to_vec()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn texts(v: &Value, key: &str) -> Vec<String> {
    match v.get(key) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => vec![],
    }
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or_default()
}

fn number(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or_default()
}

fn count(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or_default()
}

fn any(v: &Value) -> Any {
    // serde_yaml fails only on map keys that are not strings, which a JSON
    // value cannot have; JSON text would be read as YAML all the same.
    Any { yaml: serde_yaml::to_string(v).unwrap_or_else(|_| format!("{v:#}")) }
}

fn any_of(v: &Value, key: &str) -> Option<Any> {
    v.get(key).map(any)
}

fn anys(v: &Value, key: &str) -> Vec<Any> {
    v.get(key).and_then(Value::as_array).into_iter().flatten().map(any).collect()
}

/// The `x-` keys of an object, as gnostic's vendor extensions.
fn extensions(v: &Value) -> Vec<NamedAny> {
    entries(v)
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny { name: k.clone(), value: Some(any(v)) })
        .collect()
}

fn entries(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flat_map(Map::iter)
}

/// An object of named things (`x-` keys aside) as a list of named messages.
fn named<T>(v: &Value, f: impl Fn(String, &Value) -> T) -> Vec<T> {
    entries(v).filter(|(k, _)| !k.starts_with("x-")).map(|(k, v)| f(k.clone(), v)).collect()
}

fn schema(s: &Value) -> Schema {
    Schema {
        r#ref: text(s, "$ref"),
        format: text(s, "format"),
        title: text(s, "title"),
        description: text(s, "description"),
        default: any_of(s, "default"),
        multiple_of: number(s, "multipleOf"),
        maximum: number(s, "maximum"),
        exclusive_maximum: flag(s, "exclusiveMaximum"),
        minimum: number(s, "minimum"),
        exclusive_minimum: flag(s, "exclusiveMinimum"),
        max_length: count(s, "maxLength"),
        min_length: count(s, "minLength"),
        pattern: text(s, "pattern"),
        max_items: count(s, "maxItems"),
        min_items: count(s, "minItems"),
        unique_items: flag(s, "uniqueItems"),
        max_properties: count(s, "maxProperties"),
        min_properties: count(s, "minProperties"),
        required: texts(s, "required"),
        r#enum: anys(s, "enum"),
        additional_properties: s.get("additionalProperties").and_then(|a| {
            let oneof = match a {
                Value::Bool(b) => AdditionalProperties::Boolean(*b),
                Value::Object(_) => AdditionalProperties::Schema(Box::new(schema(a))),
                _ => return None,
            };
            Some(Box::new(AdditionalPropertiesItem { oneof: Some(oneof) }))
        }),
        r#type: s.get("type").map(|_| TypeItem { value: texts(s, "type") }),
        items: s.get("items").map(|i| ItemsItem {
            schema: match i {
                Value::Array(a) => a.iter().map(schema).collect(),
                one => vec![schema(one)],
            },
        }),
        properties: s.get("properties").map(|p| Properties {
            additional_properties: named(p, |name, s| NamedSchema { name, value: Some(schema(s)) }),
        }),
        discriminator: text(s, "discriminator"),
        read_only: flag(s, "readOnly"),
        external_docs: s
            .get("externalDocs")
            .map(|d| ExternalDocs { description: text(d, "description"), url: text(d, "url") }),
        example: any_of(s, "example"),
        vendor_extension: extensions(s),
    }
}

fn path_item(item: &Value) -> PathItem {
    let op = |k: &str| item.get(k).map(operation);
    PathItem {
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: parameters(item),
        vendor_extension: extensions(item),
    }
}

fn operation(op: &Value) -> Operation {
    Operation {
        tags: texts(op, "tags"),
        summary: text(op, "summary"),
        description: text(op, "description"),
        operation_id: text(op, "operationId"),
        produces: texts(op, "produces"),
        consumes: texts(op, "consumes"),
        parameters: parameters(op),
        responses: op.get("responses").map(|r| Responses {
            response_code: named(r, |name, r| NamedResponseValue {
                name,
                value: Some(ResponseValue {
                    response: Some(Response {
                        description: text(r, "description"),
                        schema: r.get("schema").map(|s| SchemaItem { schema: Some(schema(s)) }),
                        vendor_extension: extensions(r),
                    }),
                }),
            }),
            vendor_extension: extensions(r),
        }),
        deprecated: flag(op, "deprecated"),
        vendor_extension: extensions(op),
    }
}

fn parameters(v: &Value) -> Vec<ParametersItem> {
    let params = v.get("parameters").and_then(Value::as_array).into_iter().flatten();
    params.map(|p| ParametersItem { parameter: Some(Parameter { oneof: Some(parameter(p)) }) }).collect()
}

/// The two non-body parameter layouts hold the same fields under different
/// numbers; one list of what goes where serves both.
macro_rules! non_body_parameter {
    ($layout:ident, $p:expr) => {
        $layout {
            required: flag($p, "required"),
            r#in: text($p, "in"),
            description: text($p, "description"),
            name: text($p, "name"),
            r#type: text($p, "type"),
            format: text($p, "format"),
            default: any_of($p, "default"),
            unique_items: flag($p, "uniqueItems"),
            r#enum: anys($p, "enum"),
            vendor_extension: extensions($p),
        }
    };
}

fn parameter(p: &Value) -> ParameterKind {
    let query_or_form = || non_body_parameter!(QueryOrFormDataParameter, p);
    let header_or_path = || non_body_parameter!(HeaderOrPathParameter, p);
    let non_body = |kind| ParameterKind::NonBody(NonBodyParameter { oneof: Some(kind) });
    match p.get("in").and_then(Value::as_str) {
        Some("body") => ParameterKind::Body(BodyParameter {
            description: text(p, "description"),
            name: text(p, "name"),
            r#in: text(p, "in"),
            required: flag(p, "required"),
            schema: p.get("schema").map(schema),
        }),
        Some("header") => non_body(NonBodyKind::Header(header_or_path())),
        Some("path") => non_body(NonBodyKind::Path(header_or_path())),
        Some("formData") => non_body(NonBodyKind::FormData(query_or_form())),
        _ => non_body(NonBodyKind::Query(query_or_form())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The wire bytes are checked against hand-computed protobuf encodings
    /// of gnostic's field numbers, so a wrong tag cannot pass.
    #[test]
    fn a_definition_is_encoded_with_gnostic_field_numbers() {
        let doc = json!({"swagger": "2.0", "definitions": {"K": {"type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "K", "version": "v1"}],
            "properties": {"n": {"type": "integer", "minimum": 1}}}}});
        let d = Document::decode(encode(&doc).as_slice()).expect("decodes");
        assert_eq!(d.swagger, "2.0");
        let defs = d.definitions.expect("definitions").additional_properties;
        assert_eq!(defs.len(), 1);
        let k = defs[0].value.clone().expect("schema");
        assert_eq!(defs[0].name, "K");
        assert_eq!(k.r#type.expect("type").value, ["object"]);
        assert_eq!(k.vendor_extension[0].name, "x-kubernetes-group-version-kind");
        let gvk: Value = serde_yaml::from_str(&k.vendor_extension[0].value.clone().expect("value").yaml).expect("yaml");
        assert_eq!(gvk, json!([{"group": "", "kind": "K", "version": "v1"}]));
        let n = &k.properties.expect("properties").additional_properties[0];
        assert_eq!((n.name.as_str(), n.value.as_ref().map(|s| s.minimum)), ("n", Some(1.0)));

        // Document.definitions is field 9 (length-delimited: tag byte 9<<3|2 = 0x4a);
        // NamedSchema.name is field 1 of Definitions.additional_properties (field 1).
        let bytes = encode(&json!({"definitions": {"K": {}}}));
        assert_eq!(bytes, [0x4a, 0x07, 0x0a, 0x05, 0x0a, 0x01, b'K', 0x12, 0x00]);
        // Schema.type is field 22 (varint tag 22<<3|2 = 0xb2 0x01), TypeItem.value field 1.
        let bytes = encode(&json!({"definitions": {"K": {"type": "object"}}}));
        assert!(bytes.windows(4).any(|w| w == [0xb2, 0x01, 0x08, 0x0a]), "{bytes:x?}");
    }

    #[test]
    fn a_query_parameter_and_a_response_land_where_client_go_looks() {
        let doc = json!({"paths": {"/api/v1/x/{name}": {"patch": {"operationId": "patchX",
            "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": "X"},
            "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
            "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/X"}}}}}}});
        let d = Document::decode(encode(&doc).as_slice()).expect("decodes");
        let item = d.paths.expect("paths").path.remove(0);
        assert_eq!(item.name, "/api/v1/x/{name}");
        let patch = item.value.and_then(|v| v.patch).expect("patch");
        let Some(ParameterKind::NonBody(NonBodyParameter { oneof: Some(NonBodyKind::Query(q)) })) =
            patch.parameters[0].parameter.clone().and_then(|p| p.oneof)
        else {
            panic!("fieldValidation is a query parameter: {:?}", patch.parameters);
        };
        assert_eq!((q.name.as_str(), q.r#type.as_str(), q.unique_items), ("fieldValidation", "string", true));
        let ok = &patch.responses.expect("responses").response_code[0];
        let schema = ok.value.clone().and_then(|v| v.response).and_then(|r| r.schema).and_then(|s| s.schema);
        assert_eq!((ok.name.as_str(), schema.map(|s| s.r#ref)), ("200", Some("#/definitions/X".to_owned())));
    }
}
