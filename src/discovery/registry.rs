//! [`ServiceDiscovery`]: registering instances and querying the registry.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use zookeeper_client::CreateMode;

use super::cache::ServiceCache;
use super::instance::{JsonInstanceSerializer, ServiceInstance, ServiceType};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::nodes::{validate_name, PersistentNode};
use crate::path;

/// Registers service instances and reads the registry (Curator's `ServiceDiscovery<T>`),
/// under `base` with Curator's layout `<base>/<name>/<id>`.
///
/// Each registration is a [`PersistentNode`] at its instance's path, made again after every
/// new session (with the data of the last [`update`](Self::update)), as Curator registers its
/// instances again: a dynamic instance's ephemeral node, a dynamic sequential instance's node
/// (`<id><sequence>`) under the name it was first given; static and permanent instances are
/// persistent nodes. With [`watch_instances(true)`](Self::watch_instances) each registration
/// also watches its node and makes it again at once when another client deletes it.
///
/// # Requests
/// A registration is its node's create, an unregistration its delete, as Curator's
/// `registerService` and `unregisterService` (without `watchInstances`). With
/// `watch_instances(true)` a registration adds one `exists` watch on the node (sent once the
/// create has answered, in the background: [`register`](Self::register) still waits for the
/// create only), and the delete brings this session the watch's event; Curator's
/// `watchInstances(true)` keeps a node cache per instance instead, which costs more. The
/// watches are on the instances' own paths, never on a service's path, so a
/// [`ServiceCache`] of the same framework (a persistent recursive watch on the service's
/// path) does not meet a one-shot watch on its path (ZooKeeper 3.6-3.8 stop sending a
/// persistent watch's child events when a one-shot watch of the same session is on the same
/// path). One watch per instance rather than one persistent recursive watch on the base path
/// for every registration: such a watch would bring this session an event for every change
/// of every service under the base, by any client, which grows with the whole registry
/// instead of with what is registered here.
#[derive(Debug)]
pub struct ServiceDiscovery<T = serde_json::Value> {
    framework: Framework,
    base: String,
    serializer: JsonInstanceSerializer,
    registered: Mutex<HashMap<String, Arc<PersistentNode>>>,
    /// One change of the registrations at a time (register, unregister, close): two
    /// registrations of one id at once each took the place of the other, and the one dropped
    /// deleted the node both stood for.
    changing: tokio::sync::Mutex<()>,
    watch_instances: bool,
    _payload: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ServiceDiscovery<T> {
    /// A registry under `base` (namespace applied) reading and writing JSON with `serializer`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`].
    pub fn new(framework: &Framework, base: &str, serializer: JsonInstanceSerializer) -> Result<Self> {
        path::validate_recipe_path(base)?;
        Ok(ServiceDiscovery {
            framework: framework.clone(),
            base: base.to_owned(),
            serializer,
            registered: Mutex::new(HashMap::new()),
            changing: tokio::sync::Mutex::new(()),
            watch_instances: false,
            _payload: PhantomData,
        })
    }

    /// Whether registrations made from now on watch their nodes (Curator's
    /// `ServiceDiscoveryBuilder.watchInstances`; default false, as Curator's): when true, a
    /// registration whose node another client deletes is made again at once, at the cost of
    /// one watch per registration (see Requests above). Either way a registration is made
    /// again after a new session.
    pub fn watch_instances(mut self, watch: bool) -> Self {
        self.watch_instances = watch;
        self
    }

    /// The base path.
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The serializer.
    pub fn serializer(&self) -> &JsonInstanceSerializer {
        &self.serializer
    }

    /// The path of instance `id` of service `name` (for a
    /// [`DynamicSequential`](ServiceType::DynamicSequential) instance, the prefix of its
    /// node's name; [`registered_path`](Self::registered_path) has the whole path).
    pub fn instance_path(&self, name: &str, id: &str) -> String {
        crate::protocol::service_instance_path(&self.base, name, id)
    }

    /// The node path of instance `name`/`id` as registered here, once its node has been
    /// made: for a [`DynamicSequential`](ServiceType::DynamicSequential) instance with its
    /// sequence number; `None` when it is not registered here or not made yet.
    pub fn registered_path(&self, name: &str, id: &str) -> Option<String> {
        self.lock().get(&key(name, id)).and_then(|node| node.actual_path())
    }

    /// Registers `instance` and waits until its node exists (at most twice the negotiated
    /// session timeout: an ephemeral node of another session at that path is waited out; a
    /// node no session owns there, such as one a static registration left, is replaced).
    ///
    /// Registering an id again keeps the registration, as Curator keeps its entry: the same
    /// service type writes the new JSON to the node (as [`update`](Self::update) does); another
    /// type makes a node of its kind in place of the old one (at the same path the new
    /// registration takes the old node over and replaces it; where a dynamic sequential
    /// registration is involved, the old node is deleted once the new registration has
    /// started). Nothing is deleted before the new registration is in place, so a failure
    /// leaves a registration of the id in place.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name or id that is not a node name or a payload that
    /// cannot be written as JSON, [`Error::TooLarge`] for an instance whose JSON is over the
    /// request size (nothing is registered or changed then); [`Error::ConnectionTimeout`] when
    /// the node was not made in time (the registration stays and is retried in the background);
    /// the write's error when registered again as the same type (the registration stays, with
    /// the new JSON for its re-creates); the refusal that stopped it (`NoAuth`, ...).
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that the registration is kept once started: it is made in the
    /// background and [`unregister`](Self::unregister) removes it.
    pub async fn register(&self, instance: &ServiceInstance<T>) -> Result<()> {
        instance.validate()?;
        let data = self.serializer.serialize(instance)?;
        let mode = match instance.service_type {
            ServiceType::Dynamic => CreateMode::Ephemeral,
            ServiceType::DynamicSequential => CreateMode::EphemeralSequential,
            ServiceType::Static | ServiceType::Permanent => CreateMode::Persistent,
        };
        let path = self.instance_path(&instance.name, &instance.id);
        // A sequential instance is named exactly `<id><sequence>` as Curator names it, so its
        // first create is not protected; a lost answer finds the node by that name instead.
        let node = PersistentNode::builder(&self.framework, &path)
            .mode(mode)
            .protected(false)
            .found_by_name()
            .watch_node(self.watch_instances)
            .data(data.clone());
        // Refused before an earlier registration of the same instance is changed below.
        node.check()?;
        let k = key(&instance.name, &instance.id);
        let node = {
            let _one_change = self.changing.lock().await;
            let old = self.lock().get(&k).cloned();
            match old {
                Some(old) if old.mode() == mode && !old.is_stopped() => {
                    // Registered again as the same type: the registration stays and takes the
                    // new data (for its re-creates too, even when this write fails).
                    old.set_data(data).await?;
                    old
                }
                old => {
                    let old_path_differs =
                        old.as_ref().is_some_and(|old| is_sequential(old.mode()) || is_sequential(mode));
                    if let Some(old) = old.as_ref().filter(|_| !old_path_differs) {
                        // The same path: the new registration takes the old node over (it
                        // replaces a node of another type), so nothing is deleted here.
                        old.detach();
                    }
                    let node = Arc::new(node.start()?);
                    self.lock().insert(k, node.clone());
                    if let Some(old) = old.filter(|_| old_path_differs) {
                        // Another path: the old node goes once the new registration is in
                        // place (when this delete fails, the reaper finishes it).
                        if let Err(e) = old.close().await {
                            tracing::debug!(path, error = %e, "discovery: the replaced registration's delete failed");
                        }
                    }
                    node
                }
            }
        };
        let bound = self.framework.negotiated_session_timeout().unwrap_or(Duration::from_secs(30)) * 2;
        match node.wait_for_initial_create(bound).await? {
            true => Ok(()),
            false => Err(Error::ConnectionTimeout(bound)),
        }
    }

    /// Writes `instance`'s new JSON to its node (unversioned) and keeps it for re-creates.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] as for `register`, or when the instance is not registered
    /// here; [`Error::TooLarge`] for JSON a create of the node could not carry (not taken: the
    /// registration keeps the JSON of before); the write's error.
    ///
    /// # Cancel safety
    /// A cancelled update may still be written.
    pub async fn update(&self, instance: &ServiceInstance<T>) -> Result<()> {
        instance.validate()?;
        let data = self.serializer.serialize(instance)?;
        let node = self.lock().get(&key(&instance.name, &instance.id)).cloned();
        match node {
            Some(node) => node.set_data(data).await,
            None => Err(Error::invalid_argument(
                "instance",
                format!("{}/{} is not registered here", instance.name, instance.id),
            )),
        }
    }

    /// Removes the registration of `name`/`id` and deletes its node (guaranteed). One not
    /// registered here is nothing to remove.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name or id no registration can have (as the queries);
    /// the delete's error (the reaper still deletes the node).
    ///
    /// # Cancel safety
    /// Cancel-safe: once no other change of this registry's registrations is under way (one at
    /// a time), the registration is removed at once and its node deleted in the background; a
    /// call cancelled before that changes nothing.
    pub async fn unregister(&self, name: &str, id: &str) -> Result<()> {
        validate_name("name", name)?;
        validate_name("id", id)?;
        let _one_change = self.changing.lock().await;
        let node = self.lock().remove(&key(name, id));
        match node {
            Some(node) => node.close().await,
            None => Ok(()),
        }
    }

    /// Unregisters every instance registered here (Curator's `close`).
    ///
    /// # Errors
    /// The first delete error.
    ///
    /// # Cancel safety
    /// As [`unregister`](Self::unregister).
    pub async fn close(&self) -> Result<()> {
        let _one_change = self.changing.lock().await;
        let nodes: Vec<Arc<PersistentNode>> = self.lock().drain().map(|(_, n)| n).collect();
        let mut result = Ok(());
        for node in nodes {
            if let Err(e) = node.close().await {
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        result
    }

    /// The registered service names (Curator's `queryForNames`).
    ///
    /// # Errors
    /// The read's error (a missing base reads as no names).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn query_for_names(&self) -> Result<Vec<String>> {
        match self.framework.get_children(&self.base).await {
            Ok(mut names) => {
                names.sort();
                Ok(names)
            }
            Err(e) if e.is_no_node() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The instances of service `name`, by id (Curator's `queryForInstances`). Nodes whose
    /// data is not an instance's JSON are left out (and logged).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name that is not a node name; a read's error.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads change nothing.
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance<T>>> {
        validate_name("name", name)?;
        let dir = path::join(&self.base, name);
        let mut ids = match self.framework.get_children(&dir).await {
            Ok(ids) => ids,
            Err(e) if e.is_no_node() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        ids.sort();
        // Every instance's read at once, in multiRead requests (Curator reads them one by one).
        let paths: Vec<String> = ids.iter().map(|id| self.instance_path(name, id)).collect();
        let found = self.framework.get_data_many(&paths).await?;
        let mut instances = Vec::with_capacity(ids.len());
        for (path, read) in paths.iter().zip(found) {
            let Some((data, _)) = read else { continue };
            match self.serializer.deserialize(&data) {
                Ok(instance) => instances.push(instance),
                Err(e) => tracing::warn!(path, error = %e, "discovery: not an instance's JSON"),
            }
        }
        Ok(instances)
    }

    /// Instance `id` of service `name` (Curator's `queryForInstance`): `None` when missing or
    /// not an instance's JSON.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name or id that is not a node name; the read's error.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn query_for_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance<T>>> {
        validate_name("name", name)?;
        validate_name("id", id)?;
        let path = self.instance_path(name, id);
        match self.framework.get_data(&path).plain().await {
            Ok((data, _)) => match self.serializer.deserialize(&data) {
                Ok(instance) => Ok(Some(instance)),
                Err(e) => {
                    tracing::warn!(path, error = %e, "discovery: not an instance's JSON");
                    Ok(None)
                }
            },
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A cache of service `name`'s instances (start it with [`ServiceCache::start`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name that is not a node name.
    pub fn service_cache(&self, name: &str) -> Result<ServiceCache<T>> {
        validate_name("name", name)?;
        ServiceCache::new(&self.framework, &path::join(&self.base, name), self.serializer.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PersistentNode>>> {
        self.registered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn is_sequential(mode: CreateMode) -> bool {
    matches!(mode, CreateMode::EphemeralSequential | CreateMode::PersistentSequential)
}

fn key(name: &str, id: &str) -> String {
    format!("{name}/{id}")
}
