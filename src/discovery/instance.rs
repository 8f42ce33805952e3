//! [`ServiceInstance`] and its JSON, byte for byte what curator-x-discovery's
//! `JsonInstanceSerializer` writes: a compact object with the fields in Curator's declaration
//! order (`name`, `id`, `address`, `port`, `sslPort`, `payload`, `registrationTimeUTC`,
//! `serviceType`, `uriSpec`, then `enabled` only outside the compatible mode), a structured
//! payload led by Jackson's `"@class"` property.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::nodes::validate_name;

/// How an instance is registered (Curator's `ServiceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ServiceType {
    /// An ephemeral node, made again after every new session (the default).
    #[default]
    Dynamic,
    /// A persistent node.
    Static,
    /// A persistent node.
    Permanent,
    /// An ephemeral sequential node named `<id><sequence>` (10 digits, no separator), as
    /// curator-x-discovery 5.4 makes it; the JSON's `id` is the plain id. The node is made
    /// again under that same name after a new session, and unregistering deletes it (Curator
    /// makes a new sequential node on every reconnect and leaves the old one to its session).
    /// [`ServiceDiscovery::query_for_instance`](super::ServiceDiscovery::query_for_instance)
    /// looks a node up by node name, as Curator's `queryForInstance` does, so it does not
    /// find such an instance by its plain id; `query_for_instances` and the cache list it.
    DynamicSequential,
}

impl ServiceType {
    /// The JSON name (`DYNAMIC`, `STATIC`, `PERMANENT`, `DYNAMIC_SEQUENTIAL`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "DYNAMIC",
            ServiceType::Static => "STATIC",
            ServiceType::Permanent => "PERMANENT",
            ServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }

    fn parse(s: &str) -> Result<ServiceType> {
        match s {
            "DYNAMIC" => Ok(ServiceType::Dynamic),
            "STATIC" => Ok(ServiceType::Static),
            "PERMANENT" => Ok(ServiceType::Permanent),
            "DYNAMIC_SEQUENTIAL" => Ok(ServiceType::DynamicSequential),
            other => Err(Error::invalid_argument("serviceType", format!("{other:?} is not supported"))),
        }
    }
}

/// One part of a [`UriSpec`]: literal text, or a `{variable}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// True for a `{variable}`.
    pub variable: bool,
}

/// A URI template (Curator's `UriSpec`): `"{scheme}://{address}:{port}/api"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UriSpec {
    /// The parts in order.
    pub parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a template as Curator's `UriSpec(String)` does: `{name}` tokens become variable
    /// parts (the name trimmed; `{}` makes no part), the text between them literal parts. A
    /// template Curator refuses (`{` inside a variable, `}` with no `{`, a variable not
    /// closed) is read leniently here (the text as it stands); [`parse`](Self::parse) refuses
    /// it.
    pub fn new(template: &str) -> UriSpec {
        Self::parse(template).unwrap_or_else(|_| Self::lenient(template))
    }

    /// [`new`](Self::new), refusing what Curator refuses.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `{` inside a variable, `}` with no `{` before it, or a
    /// variable not closed.
    pub fn parse(template: &str) -> Result<UriSpec> {
        let refused = |reason: &str| Error::invalid_argument("uri_spec", format!("{template:?}: {reason}"));
        let mut parts = Vec::new();
        let mut inside = false;
        let mut rest = template;
        while !rest.is_empty() {
            let at = rest.find(['{', '}']).unwrap_or(rest.len());
            let (token, after) = rest.split_at(at);
            if !token.is_empty() {
                let value = if inside { token.trim() } else { token };
                parts.push(UriPart { value: value.to_owned(), variable: inside });
            }
            match after.chars().next() {
                Some('{') if inside => return Err(refused("{ is not allowed inside of a variable specification")),
                Some('{') => inside = true,
                Some('}') if !inside => return Err(refused("} must be preceded by {")),
                Some('}') => inside = false,
                _ => {}
            }
            rest = after.get(1..).unwrap_or_default();
        }
        if inside {
            return Err(refused("final variable not closed - expected }"));
        }
        Ok(UriSpec { parts })
    }

    /// A template Curator refuses, read as well as it goes: `{` and `}` only where they open
    /// and close a variable, literal elsewhere.
    fn lenient(template: &str) -> UriSpec {
        let mut parts = Vec::new();
        let mut current = String::new();
        let mut in_variable = false;
        for c in template.chars() {
            match c {
                '{' if !in_variable => {
                    if !current.is_empty() {
                        parts.push(UriPart { value: std::mem::take(&mut current), variable: false });
                    }
                    in_variable = true;
                }
                '}' if in_variable => {
                    let name = std::mem::take(&mut current);
                    if !name.is_empty() {
                        parts.push(UriPart { value: name.trim().to_owned(), variable: true });
                    }
                    in_variable = false;
                }
                c => current.push(c),
            }
        }
        if in_variable {
            // Not closed: its brace and text as they stand.
            current.insert(0, '{');
        }
        if !current.is_empty() {
            parts.push(UriPart { value: current, variable: false });
        }
        UriSpec { parts }
    }

    /// The URI (Curator's `UriSpec.build(instance, variables)`): literal parts as they are,
    /// variables replaced by `variables` first, then by the instance's fields (`scheme`:
    /// `https` when it has an SSL port, else `http`; `name`, `id`, `address`, `port`,
    /// `ssl-port`, `registration-time-utc`, `service-type` (lowercase); a field it lacks is
    /// empty), `[` and `]` by literal braces; a variable with no value is left out.
    pub fn build<T>(
        &self,
        instance: Option<&ServiceInstance<T>>,
        variables: &std::collections::HashMap<String, String>,
    ) -> String {
        let number = |n: Option<u16>| n.map(|n| n.to_string()).unwrap_or_default();
        let field = |name: &str| -> Option<String> {
            let scheme = || if instance.is_some_and(|i| i.ssl_port.is_some()) { "https" } else { "http" };
            match name {
                "[" => Some("{".to_owned()),
                "]" => Some("}".to_owned()),
                "scheme" => Some(scheme().to_owned()),
                _ => {
                    let i = instance?;
                    match name {
                        "name" => Some(i.name.clone()),
                        "id" => Some(i.id.clone()),
                        "address" => Some(i.address.clone().unwrap_or_default()),
                        "port" => Some(number(i.port)),
                        "ssl-port" => Some(number(i.ssl_port)),
                        "registration-time-utc" => Some(i.registration_time_utc.to_string()),
                        "service-type" => Some(i.service_type.as_str().to_lowercase()),
                        _ => None,
                    }
                }
            }
        };
        let mut uri = String::new();
        for part in &self.parts {
            if !part.variable {
                uri.push_str(&part.value);
            } else if let Some(value) = variables.get(&part.value).cloned().or_else(|| field(&part.value)) {
                uri.push_str(&value);
            }
        }
        uri
    }

    fn to_json_string(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("{{\"value\":{},\"variable\":{}}}", Value::String(p.value.clone()), p.variable))
            .collect();
        format!("{{\"parts\":[{}]}}", parts.join(","))
    }

    fn from_json(v: &Value) -> Result<UriSpec> {
        let bad = || Error::invalid_argument("uriSpec", "expected {\"parts\":[{\"value\":..,\"variable\":..}]}");
        let parts = match v.get("parts") {
            None | Some(Value::Null) => return Ok(UriSpec::default()),
            Some(Value::Array(parts)) => parts,
            Some(_) => return Err(bad()),
        };
        let parts = parts
            .iter()
            .map(|p| {
                // Curator's `Part()` reads a missing value as "".
                let value = match p.get("value") {
                    None | Some(Value::Null) => String::new(),
                    Some(value) => value.as_str().ok_or_else(bad)?.to_owned(),
                };
                let variable = p.get("variable").and_then(Value::as_bool).unwrap_or(false);
                Ok(UriPart { value, variable })
            })
            .collect::<Result<_>>()?;
        Ok(UriSpec { parts })
    }
}

/// One registered instance of a service (Curator's `ServiceInstance<T>`), with a payload of
/// type `T` (`serde_json::Value` for a raw JSON payload, the default).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServiceInstance<T = Value> {
    /// The service's name (a node name: no `/`).
    pub name: String,
    /// The instance's id (a node name: no `/`).
    pub id: String,
    /// Its address.
    pub address: Option<String>,
    /// Its port.
    pub port: Option<u16>,
    /// Its TLS port.
    pub ssl_port: Option<u16>,
    /// Its payload.
    pub payload: Option<T>,
    /// When it was registered, in milliseconds since the Unix epoch.
    pub registration_time_utc: i64,
    /// How it is registered.
    pub service_type: ServiceType,
    /// Its URI template.
    pub uri_spec: Option<UriSpec>,
    /// Whether providers hand it out (a missing field reads as true).
    pub enabled: bool,
}

impl<T> ServiceInstance<T> {
    /// A builder of an instance of service `name` (Curator's `ServiceInstance.builder()`):
    /// every setter is infallible, and [`build`](ServiceInstanceBuilder::build) checks the
    /// name and id once, with a typed error.
    ///
    /// As Curator's builder, it starts with this host's address: the address the host
    /// reaches other networks from (the source address of its default route, IPv4 before
    /// IPv6; never a loopback address), or none without such a route. Curator takes the
    /// first non-loopback, non-link-local address of its network interfaces, which on a host
    /// with one network is the same one; set [`address`](ServiceInstanceBuilder::address)
    /// where a host has several.
    ///
    /// ```
    /// use zk_recipes::discovery::ServiceInstance;
    ///
    /// let instance: ServiceInstance = ServiceInstance::builder("api")
    ///     .id("api-1")
    ///     .address("10.0.0.7")
    ///     .port(8080)
    ///     .build()?;
    /// assert_eq!(instance.port, Some(8080));
    /// assert!(ServiceInstance::<serde_json::Value>::builder("api").id("a/b").build().is_err());
    /// # Ok::<(), zk_recipes::Error>(())
    /// ```
    pub fn builder(name: &str) -> ServiceInstanceBuilder<T> {
        ServiceInstanceBuilder { name: name.to_owned(), id: None, instance: ServiceInstance::unchecked(String::new()) }
    }

    fn unchecked(name: String) -> ServiceInstance<T> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        ServiceInstance {
            name,
            id: uuid::Uuid::new_v4().to_string(),
            address: local_address(),
            port: None,
            ssl_port: None,
            payload: None,
            registration_time_utc: now,
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: true,
        }
    }

    /// An instance of service `name` with a random UUID id, this host's address (see
    /// [`builder`](Self::builder)), registered now, dynamic, enabled.
    /// Each `with_` setter below checks its value at once; [`builder`](Self::builder) checks
    /// once, at `build()`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name or one that is not a node name.
    pub fn new(name: &str) -> Result<ServiceInstance<T>> {
        validate_name("name", name)?;
        Ok(ServiceInstance::unchecked(name.to_owned()))
    }

    /// Sets the id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty id or one that is not a node name.
    pub fn with_id(mut self, id: &str) -> Result<Self> {
        validate_name("id", id)?;
        self.id = id.to_owned();
        Ok(self)
    }

    /// Sets the address.
    pub fn with_address(mut self, address: &str) -> Self {
        self.address = Some(address.to_owned());
        self
    }

    /// Sets the port.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a port above 65535.
    pub fn with_port(mut self, port: u32) -> Result<Self> {
        self.port = Some(check_port("port", port)?);
        Ok(self)
    }

    /// Sets the TLS port.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a port above 65535.
    pub fn with_ssl_port(mut self, port: u32) -> Result<Self> {
        self.ssl_port = Some(check_port("ssl_port", port)?);
        Ok(self)
    }

    /// Sets the payload.
    pub fn with_payload(mut self, payload: T) -> Self {
        self.payload = Some(payload);
        self
    }

    /// Sets the service type.
    pub fn with_service_type(mut self, service_type: ServiceType) -> Self {
        self.service_type = service_type;
        self
    }

    /// Sets the URI template.
    pub fn with_uri_spec(mut self, uri_spec: UriSpec) -> Self {
        self.uri_spec = Some(uri_spec);
        self
    }

    /// Its URI spec built with its own fields (Curator's `buildUriSpec()`): see
    /// [`UriSpec::build`]; empty without a spec.
    pub fn build_uri_spec(&self) -> String {
        self.build_uri_spec_with(&std::collections::HashMap::new())
    }

    /// [`build_uri_spec`](Self::build_uri_spec) with `variables`, which come before the
    /// instance's fields (Curator's `buildUriSpec(variables)`).
    pub fn build_uri_spec_with(&self, variables: &std::collections::HashMap<String, String>) -> String {
        self.uri_spec.as_ref().map(|spec| spec.build(Some(self), variables)).unwrap_or_default()
    }

    /// Sets whether providers hand it out.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        validate_name("name", &self.name)?;
        validate_name("id", &self.id)
    }
}

/// This host's address as a new instance's default: the source address of the route to a
/// documentation-only address (TEST-NET-1, then 2001:db8::), which picks the default route's
/// interface without sending anything (a UDP `connect` only chooses a route). None without a
/// route, or when the route's source is loopback, unspecified or link-local.
fn local_address() -> Option<String> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
    let targets = [
        (SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)), SocketAddr::from((Ipv4Addr::new(192, 0, 2, 1), 9))),
        (
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
            SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 9)),
        ),
    ];
    targets.into_iter().find_map(|(bind, target)| {
        let socket = UdpSocket::bind(bind).ok()?;
        socket.connect(target).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        };
        (!ip.is_loopback() && !ip.is_unspecified() && !link_local).then(|| ip.to_string())
    })
}

/// Builds a [`ServiceInstance`] (Curator's `ServiceInstanceBuilder`): made by
/// [`ServiceInstance::builder`], every setter infallible, the name and id checked by
/// [`build`](Self::build). Unset, the id is a random UUID, the instance dynamic and enabled,
/// registered now.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct ServiceInstanceBuilder<T = Value> {
    name: String,
    id: Option<String>,
    instance: ServiceInstance<T>,
}

impl<T> ServiceInstanceBuilder<T> {
    /// Sets the id (a node name; checked by [`build`](Self::build)).
    #[doc(alias = "with_id")]
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }

    /// Sets the address.
    #[doc(alias = "with_address")]
    pub fn address(mut self, address: &str) -> Self {
        self.instance.address = Some(address.to_owned());
        self
    }

    /// Sets the port.
    #[doc(alias = "with_port")]
    pub fn port(mut self, port: u16) -> Self {
        self.instance.port = Some(port);
        self
    }

    /// Sets the TLS port.
    #[doc(alias = "with_ssl_port")]
    pub fn ssl_port(mut self, port: u16) -> Self {
        self.instance.ssl_port = Some(port);
        self
    }

    /// Sets the payload.
    #[doc(alias = "with_payload")]
    pub fn payload(mut self, payload: T) -> Self {
        self.instance.payload = Some(payload);
        self
    }

    /// Sets the service type.
    #[doc(alias = "with_service_type")]
    pub fn service_type(mut self, service_type: ServiceType) -> Self {
        self.instance.service_type = service_type;
        self
    }

    /// Sets the URI template.
    #[doc(alias = "with_uri_spec")]
    pub fn uri_spec(mut self, uri_spec: UriSpec) -> Self {
        self.instance.uri_spec = Some(uri_spec);
        self
    }

    /// Sets whether providers hand it out.
    #[doc(alias = "with_enabled")]
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.instance.enabled = enabled;
        self
    }

    /// The instance.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (named `name` or `id`) for an empty name or id, or one that
    /// is not a node name.
    pub fn build(self) -> Result<ServiceInstance<T>> {
        let ServiceInstanceBuilder { name, id, mut instance } = self;
        validate_name("name", &name)?;
        instance.name = name;
        if let Some(id) = id {
            validate_name("id", &id)?;
            instance.id = id;
        }
        Ok(instance)
    }
}

fn check_port(name: &'static str, port: u32) -> Result<u16> {
    u16::try_from(port).map_err(|_| Error::invalid_argument(name, format!("{port} is not a port (0 to 65535)")))
}

/// The payload classes Jackson writes without a type id (its "natural" types: JSON's own
/// string, integer, floating-point and boolean values read back as them).
const JACKSON_NATURAL: [&str; 4] = ["java.lang.String", "java.lang.Integer", "java.lang.Double", "java.lang.Boolean"];

/// Curator's `JsonInstanceSerializer`: the JSON of a [`ServiceInstance`].
#[derive(Debug, Clone, Default)]
pub struct JsonInstanceSerializer {
    payload_class: Option<String>,
    write_enabled: bool,
}

impl JsonInstanceSerializer {
    /// Curator's default (`new JsonInstanceSerializer<>(cls)`, compatible mode): no `enabled`
    /// field, the payload as serde writes it.
    pub fn new() -> JsonInstanceSerializer {
        JsonInstanceSerializer::default()
    }

    /// The Java class of the payload, written as Jackson writes Curator's payloads, with a type
    /// id a Java reader needs to rebuild its payload class: a payload that is a JSON object
    /// gets a leading `"@class"` property; any other is wrapped as `["<class>", value]`
    /// (`["java.lang.Long",5]`, `["java.util.ArrayList",["a","b"]]`), except for
    /// `java.lang.String`, `java.lang.Integer`, `java.lang.Double` and `java.lang.Boolean`,
    /// which Jackson writes bare. Reading, the type id is removed before a typed payload is
    /// read, in either form (an array only when its first element is this class). Without a class, payloads are written and read as they are (a
    /// Curator `Long` then reads as the array).
    pub fn payload_class(mut self, class: &str) -> Self {
        self.payload_class = Some(class.to_owned());
        self
    }

    /// Writes the `enabled` field (Curator's `new JsonInstanceSerializer<>(cls, false)`).
    pub fn with_enabled_field(mut self) -> Self {
        self.write_enabled = true;
        self
    }

    /// The JSON bytes of `instance`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the payload cannot be written as JSON.
    pub fn serialize<T: Serialize>(&self, instance: &ServiceInstance<T>) -> Result<Vec<u8>> {
        // Written field by field: serde_json's own map would sort the keys, and Curator's
        // readers do not care but its writers (and byte-for-byte tests) keep this order.
        let json = |v: &Value| v.to_string();
        let opt_str = |s: &Option<String>| json(&s.clone().map_or(Value::Null, Value::String));
        let opt_port = |p: Option<u16>| json(&p.map_or(Value::Null, Value::from));
        let payload = match &instance.payload {
            None => "null".to_owned(),
            Some(p) => {
                // The payload's own order is kept (a struct's fields as declared).
                let text = serde_json::to_string(p).map_err(|e| Error::invalid_argument("payload", e.to_string()))?;
                match &self.payload_class {
                    Some(class) if text.starts_with('{') && !text.starts_with("{\"@class\"") => {
                        let class = json(&Value::String(class.clone()));
                        if text == "{}" {
                            format!("{{\"@class\":{class}}}")
                        } else {
                            format!("{{\"@class\":{class},{}", &text[1..])
                        }
                    }
                    // Jackson's type id for a value that is no object: a wrapping array,
                    // except for the four classes JSON's own values stand for.
                    Some(class) if !text.starts_with('{') && !JACKSON_NATURAL.contains(&class.as_str()) => {
                        format!("[{},{text}]", json(&Value::String(class.clone())))
                    }
                    _ => text,
                }
            }
        };
        let mut out = String::with_capacity(256 + payload.len());
        out.push_str(&format!(
            "{{\"name\":{},\"id\":{},\"address\":{},\"port\":{},\"sslPort\":{},\"payload\":{},\"registrationTimeUTC\":{},\"serviceType\":\"{}\",\"uriSpec\":{}",
            json(&Value::String(instance.name.clone())),
            json(&Value::String(instance.id.clone())),
            opt_str(&instance.address),
            opt_port(instance.port),
            opt_port(instance.ssl_port),
            payload,
            instance.registration_time_utc,
            instance.service_type.as_str(),
            instance.uri_spec.as_ref().map_or_else(|| "null".to_owned(), |u| u.to_json_string()),
        ));
        if self.write_enabled {
            out.push_str(if instance.enabled { ",\"enabled\":true" } else { ",\"enabled\":false" });
        }
        out.push('}');
        Ok(out.into_bytes())
    }

    /// The instance in `bytes` (missing fields take Curator's defaults; unknown ones are
    /// ignored).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bytes that are not such JSON, or a payload that is not a `T`.
    pub fn deserialize<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<ServiceInstance<T>> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| Error::invalid_argument("instance", e.to_string()))?;
        let Value::Object(o) = v else {
            return Err(Error::invalid_argument("instance", "not a JSON object"));
        };
        let string = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
        let port = |k: &'static str| -> Result<Option<u16>> {
            match o.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .map(Some)
                    .ok_or_else(|| Error::invalid_argument(k, format!("{v} is not a port"))),
            }
        };
        let payload = match o.get("payload") {
            None | Some(Value::Null) => None,
            Some(p) => {
                let mut p = p.clone();
                if self.payload_class.is_some() {
                    match &mut p {
                        Value::Object(fields) => {
                            fields.remove("@class");
                        }
                        // `["java.lang.Long", 5]`: Jackson's type id wrapping a value that is
                        // no object (a Java list is one too: `["java.util.ArrayList", [..]]`).
                        // Only with the class this serializer writes: another two-element
                        // array whose first element is a string is the payload itself.
                        Value::Array(wrapped)
                            if wrapped.len() == 2 && wrapped[0].as_str() == self.payload_class.as_deref() =>
                        {
                            p = wrapped.pop().unwrap_or(Value::Null);
                        }
                        _ => {}
                    }
                }
                Some(serde_json::from_value(p).map_err(|e| Error::invalid_argument("payload", e.to_string()))?)
            }
        };
        Ok(ServiceInstance {
            name: string("name").unwrap_or_default(),
            id: string("id").unwrap_or_default(),
            address: string("address"),
            port: port("port")?,
            ssl_port: port("sslPort")?,
            payload,
            registration_time_utc: o.get("registrationTimeUTC").and_then(Value::as_i64).unwrap_or(0),
            service_type: match o.get("serviceType").and_then(Value::as_str) {
                None => ServiceType::Dynamic,
                Some(s) => ServiceType::parse(s)?,
            },
            uri_spec: match o.get("uriSpec") {
                None | Some(Value::Null) => None,
                Some(v) => Some(UriSpec::from_json(v)?),
            },
            enabled: o.get("enabled").and_then(Value::as_bool).unwrap_or(true),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// As Curator's builder, a new instance starts with this host's address: on a host with a
    /// default IPv4 route, that route's source address, never loopback.
    #[test]
    fn a_new_instance_has_this_hosts_address() {
        let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
        let default_route = routes.lines().skip(1).any(|line| line.split_whitespace().nth(1) == Some("00000000"));
        let built = ServiceInstance::<Value>::builder("api").build().unwrap();
        assert_eq!(built.address, ServiceInstance::<Value>::new("api").unwrap().address);
        if default_route {
            let address: std::net::Ipv4Addr = built.address.as_deref().expect("an address").parse().expect("IPv4");
            assert!(!address.is_loopback() && !address.is_unspecified(), "{address}");
        }
        let cleared = ServiceInstance::<Value>::builder("api").address("10.0.0.9").build().unwrap();
        assert_eq!(cleared.address.as_deref(), Some("10.0.0.9"));
    }

    /// The bytes Curator 5.4's default serializer writes for this instance.
    const CURATOR: &str = r#"{"name":"test","id":"5c2a9e-1111-2222-3333-444455556666","address":"10.0.0.5","port":8080,"sslPort":null,"payload":{"@class":"com.example.InstanceDetails","description":"hello"},"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/api","variable":false}]}}"#;

    fn instance() -> ServiceInstance<Value> {
        let mut details = Map::new();
        details.insert("description".into(), Value::String("hello".into()));
        let mut i = ServiceInstance::new("test")
            .unwrap()
            .with_id("5c2a9e-1111-2222-3333-444455556666")
            .unwrap()
            .with_address("10.0.0.5")
            .with_port(8080)
            .unwrap()
            .with_payload(Value::Object(details))
            .with_uri_spec(UriSpec::new("{scheme}://{address}:{port}/api"));
        i.registration_time_utc = 1_700_000_000_123;
        i
    }

    #[test]
    fn writes_curators_bytes() {
        let s = JsonInstanceSerializer::new().payload_class("com.example.InstanceDetails");
        assert_eq!(String::from_utf8(s.serialize(&instance()).unwrap()).unwrap(), CURATOR);
        let with_enabled = s.clone().with_enabled_field().serialize(&instance()).unwrap();
        assert!(String::from_utf8(with_enabled).unwrap().ends_with(r#"]},"enabled":true}"#));
    }

    #[test]
    fn reads_curators_bytes_back() {
        let s = JsonInstanceSerializer::new().payload_class("com.example.InstanceDetails");
        let read: ServiceInstance<Value> = s.deserialize(CURATOR.as_bytes()).unwrap();
        assert_eq!(read, instance());
        let raw: ServiceInstance<Value> = JsonInstanceSerializer::new().deserialize(CURATOR.as_bytes()).unwrap();
        assert_eq!(raw.payload.unwrap()["@class"], "com.example.InstanceDetails");
    }

    /// Written by Curator 5.4's `new JsonInstanceSerializer<>(Map.class)` for a `LinkedHashMap`
    /// payload; Curator reads the Rust bytes back as an equal instance.
    const CURATOR_MAP: &str = r#"{"name":"api","id":"one","address":"10.0.0.5","port":8080,"sslPort":null,"payload":{"@class":"java.util.LinkedHashMap","description":"hello"},"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true},{"value":"/api","variable":false}]}}"#;

    #[test]
    fn a_map_payload_as_curator_writes_it() {
        let s = JsonInstanceSerializer::new().payload_class("java.util.LinkedHashMap");
        let mut i = instance().with_id("one").unwrap();
        i.name = "api".into();
        assert_eq!(String::from_utf8(s.serialize(&i).unwrap()).unwrap(), CURATOR_MAP);
        assert_eq!(s.deserialize::<Value>(CURATOR_MAP.as_bytes()).unwrap(), i);
    }

    #[test]
    fn every_service_type_by_its_curator_name() {
        for (t, name) in [
            (ServiceType::Dynamic, "DYNAMIC"),
            (ServiceType::Static, "STATIC"),
            (ServiceType::Permanent, "PERMANENT"),
            (ServiceType::DynamicSequential, "DYNAMIC_SEQUENTIAL"),
        ] {
            assert_eq!(t.as_str(), name);
            assert_eq!(ServiceType::parse(name).unwrap(), t);
            let s = JsonInstanceSerializer::new().payload_class("com.example.InstanceDetails");
            let json = CURATOR.replace("\"DYNAMIC\"", &format!("\"{name}\""));
            let read: ServiceInstance<Value> = s.deserialize(json.as_bytes()).unwrap();
            assert_eq!(read.service_type, t);
            assert_eq!(String::from_utf8(s.serialize(&read).unwrap()).unwrap(), json);
        }
        assert!(ServiceType::parse("dynamic").is_err());
    }

    #[test]
    fn bad_input() {
        assert!(ServiceInstance::<Value>::new("").is_err());
        assert!(ServiceInstance::<Value>::new("a/b").is_err());
        assert!(ServiceInstance::<Value>::new("a").unwrap().with_port(70000).is_err());
        assert!(ServiceInstance::<Value>::new("a").unwrap().with_id("x/y").is_err());
        for (name, id, field) in [("", "i", "name"), ("a/b", "i", "name"), ("a", "", "id"), ("a", "x/y", "id")] {
            match ServiceInstance::<Value>::builder(name).id(id).port(1).build() {
                Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, field),
                other => panic!("{name:?}/{id:?}: {other:?}"),
            }
        }
        let built = ServiceInstance::<Value>::builder("a").ssl_port(443).enabled(false).build().unwrap();
        assert_eq!((built.name.as_str(), built.ssl_port, built.enabled), ("a", Some(443), false));
        assert!(uuid::Uuid::parse_str(&built.id).is_ok(), "an unset id is a uuid");
        let s = JsonInstanceSerializer::new();
        assert!(s.deserialize::<Value>(b"{not json").is_err());
        assert!(s.deserialize::<Value>(br#"{"port":70000}"#).is_err());
    }
}

#[cfg(test)]
mod uri_spec_tests {
    use std::collections::HashMap;

    use super::*;

    fn parts(spec: &UriSpec) -> Vec<(&str, bool)> {
        spec.parts.iter().map(|p| (p.value.as_str(), p.variable)).collect()
    }

    /// Curator's `UriSpec(String)`: variable names trimmed, `{}` no part, and three refusals.
    #[test]
    fn templates_parse_as_curators() {
        let spec = UriSpec::parse("{scheme}://{ address }:{port}{}/x").unwrap();
        assert_eq!(
            parts(&spec),
            [("scheme", true), ("://", false), ("address", true), (":", false), ("port", true), ("/x", false)]
        );
        for refused in ["a}b", "{a{b}", "{port"] {
            assert!(matches!(UriSpec::parse(refused), Err(Error::InvalidArgument { .. })), "{refused:?}");
            // `new` reads it as well as it goes, never panicking.
            let _ = UriSpec::new(refused);
        }
        assert_eq!(UriSpec::new("{ port }"), UriSpec::parse("{port}").unwrap());
    }

    /// Curator's `build`: the instance's fields, `https` with an SSL port, braces from `[` and
    /// `]`, the caller's variables first, an unknown variable left out.
    #[test]
    fn a_spec_builds_as_curators() {
        let spec = UriSpec::new("{scheme}://{address}:{port}/{name}/{id}{[}{x}{]}{missing}|{service-type}|{ssl-port}");
        let plain: ServiceInstance = ServiceInstance::new("api")
            .unwrap()
            .with_id("i1")
            .unwrap()
            .with_address("10.0.0.1")
            .with_port(8080)
            .unwrap()
            .with_uri_spec(spec.clone());
        assert_eq!(plain.build_uri_spec(), "http://10.0.0.1:8080/api/i1{}|dynamic|");
        let vars = HashMap::from([("x".to_owned(), "y".to_owned()), ("port".to_owned(), "1".to_owned())]);
        assert_eq!(plain.build_uri_spec_with(&vars), "http://10.0.0.1:1/api/i1{y}|dynamic|");
        let secure = plain.clone().with_ssl_port(8443).unwrap();
        assert_eq!(secure.build_uri_spec(), "https://10.0.0.1:8080/api/i1{}|dynamic|8443");
        assert_eq!(spec.build::<serde_json::Value>(None, &HashMap::new()), "http://://{}||");
        let bare: ServiceInstance = ServiceInstance::new("api").unwrap();
        assert_eq!(bare.build_uri_spec(), "", "no spec");
    }
}
