//! The CustomResourceDefinitions the hub serves: the twenty CRD manifests embedded from
//! `proto/crds/` (OCM's, and SIG-multicluster's ClusterProfile, which OCM's hub writes), parsed
//! once into the names, versions, printer columns and structural schemas the API server
//! serves custom resources with.

use std::sync::LazyLock;

use serde::Deserialize;

use crate::schema::{Schema, SchemaError};

/// The embedded CRD manifests, in the order their file names sort.
const CRD_SOURCES: &[&str] = &[
    include_str!(
        "../crds/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml"
    ),
    include_str!("../crds/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"),
    include_str!("../crds/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml"),
    include_str!(
        "../crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
    ),
    include_str!("../crds/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"),
    include_str!("../crds/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml"),
    include_str!(
        "../crds/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml"
    ),
    include_str!("../crds/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml"),
    include_str!(
        "../crds/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml"
    ),
    include_str!("../crds/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"),
    include_str!("../crds/0000_02_clusters.open-cluster-management.io_placements.crd.yaml"),
    include_str!("../crds/0000_03_addon.open-cluster-management.io_addontemplates.crd.yaml"),
    include_str!("../crds/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml"),
    include_str!(
        "../crds/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml"
    ),
    include_str!(
        "../crds/authentication.open-cluster-management.io_managedserviceaccounts.crd.yaml"
    ),
    include_str!("../crds/policy.open-cluster-management.io_configurationpolicies.crd.yaml"),
    include_str!("../crds/policy.open-cluster-management.io_placementbindings.crd.yaml"),
    include_str!("../crds/policy.open-cluster-management.io_policies.crd.yaml"),
    include_str!("../crds/policy.open-cluster-management.io_policysets.crd.yaml"),
    include_str!("../crds/multicluster.x-k8s.io_clusterprofiles.crd.yaml"),
];

/// Why a manifest is not a CRD this crate can serve.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The YAML does not parse into the CRD shape.
    #[error("CRD manifest does not parse: {0}")]
    Yaml(#[from] Box<serde_saphyr::Error>),
    /// The manifest is some other object.
    #[error("not an apiextensions.k8s.io/v1 CustomResourceDefinition: {api_version} {kind}")]
    NotACrd {
        /// The manifest's `apiVersion`.
        api_version: String,
        /// The manifest's `kind`.
        kind: String,
    },
    /// `spec.scope` is neither `Cluster` nor `Namespaced`.
    #[error("CRD {name}: unknown scope {scope:?}")]
    Scope {
        /// `metadata.name`-style name of the CRD (`plural.group`).
        name: String,
        /// The scope found.
        scope: String,
    },
    /// Not exactly one version has `storage: true`.
    #[error("CRD {name}: {count} storage versions, exactly one is required")]
    StorageVersions {
        /// `plural.group`.
        name: String,
        /// How many versions are marked for storage.
        count: usize,
    },
    /// A version has no `schema.openAPIV3Schema`.
    #[error("CRD {name} version {version}: no openAPIV3Schema")]
    MissingSchema {
        /// `plural.group`.
        name: String,
        /// The version.
        version: String,
    },
    /// A version's schema is not a structural schema we understand.
    #[error("CRD {name} version {version}: {source}")]
    Schema {
        /// `plural.group`.
        name: String,
        /// The version.
        version: String,
        /// What is wrong with the schema.
        source: SchemaError,
    },
}

/// A parsed CustomResourceDefinition: what discovery, routing, printing and validation need.
#[derive(Debug, Clone)]
pub struct Crd {
    /// API group, e.g. `cluster.open-cluster-management.io`.
    pub group: String,
    /// Kind, e.g. `ManagedCluster`.
    pub kind: String,
    /// List kind, e.g. `ManagedClusterList` (defaults to kind + `List`).
    pub list_kind: String,
    /// Resource name, e.g. `managedclusters`.
    pub plural: String,
    /// Singular name, e.g. `managedcluster` (defaults to the lower-cased kind).
    pub singular: String,
    /// Short names, e.g. `mcl`, `mcls`.
    pub short_names: Vec<String>,
    /// Categories (`kubectl get all` style).
    pub categories: Vec<String>,
    /// Whether objects live in namespaces (`scope: Namespaced`).
    pub namespaced: bool,
    /// The versions, in the order the manifest lists them.
    pub versions: Vec<CrdVersion>,
}

/// One version of a CRD.
#[derive(Debug, Clone)]
pub struct CrdVersion {
    /// Version name, e.g. `v1beta1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether this is the storage version.
    pub storage: bool,
    /// The structural schema of objects of this version.
    pub schema: Schema,
    /// The same schema as the CRD wrote it (`openAPIV3Schema`), for publishing in OpenAPI.
    pub openapi_schema: serde_json::Value,
    /// Whether the `/status` subresource is enabled.
    pub status_subresource: bool,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<PrinterColumn>,
    /// `selectableFields` as JSON paths such as `.spec.x`.
    pub selectable_fields: Vec<String>,
    /// Whether the version is deprecated.
    pub deprecated: bool,
    /// The warning returned to clients of a deprecated version.
    pub deprecation_warning: Option<String>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header, e.g. `Hub Accepted`.
    pub name: String,
    /// OpenAPI type of the column: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// Optional OpenAPI format.
    pub format: Option<String>,
    /// Human description.
    pub description: Option<String>,
    /// 0 for the default table, higher for wide output.
    pub priority: i32,
    /// The (kubectl JSONPath) expression, e.g. `.spec.hubAcceptsClient`.
    pub json_path: String,
}

impl Crd {
    /// Parses one CRD manifest (YAML or JSON).
    pub fn from_yaml(yaml: &str) -> Result<Crd, CrdError> {
        Crd::extended(yaml, &[])
    }

    /// Parses one CRD manifest with the schema properties its entry in `extensions` (by CRD
    /// name) adds: a YAML map of version to a schema fragment merged into `openAPIV3Schema`.
    pub fn extended(yaml: &str, extensions: &[(&str, &str)]) -> Result<Crd, CrdError> {
        let raw: RawCrd = serde_saphyr::from_str(yaml).map_err(Box::new)?;
        if raw.api_version != "apiextensions.k8s.io/v1" || raw.kind != "CustomResourceDefinition" {
            return Err(CrdError::NotACrd { api_version: raw.api_version, kind: raw.kind });
        }
        let spec = raw.spec;
        let name = format!("{}.{}", spec.names.plural, spec.group);
        let namespaced = match spec.scope.as_str() {
            "Namespaced" => true,
            "Cluster" => false,
            _ => return Err(CrdError::Scope { name, scope: spec.scope }),
        };
        let extension: serde_json::Value = match extensions.iter().find(|(crd, _)| *crd == name) {
            Some((_, e)) => serde_saphyr::from_str(e).map_err(Box::new)?,
            None => serde_json::Value::Null,
        };
        let count = spec.versions.iter().filter(|v| v.storage).count();
        if count != 1 {
            return Err(CrdError::StorageVersions { name, count });
        }
        let versions = spec
            .versions
            .into_iter()
            .map(|v| {
                let mut raw_schema =
                    v.schema.and_then(|s| s.open_api_v3_schema).ok_or_else(|| {
                        CrdError::MissingSchema { name: name.clone(), version: v.name.clone() }
                    })?;
                if let Some(added) = extension.get(&v.name) {
                    merge_schema(&mut raw_schema, added);
                }
                let schema = Schema::from_value(&raw_schema).map_err(|source| {
                    CrdError::Schema { name: name.clone(), version: v.name.clone(), source }
                })?;
                Ok(CrdVersion {
                    schema,
                    openapi_schema: raw_schema,
                    served: v.served,
                    storage: v.storage,
                    status_subresource: v.subresources.is_some_and(|s| s.status.is_some()),
                    printer_columns: v
                        .additional_printer_columns
                        .into_iter()
                        .map(|c| PrinterColumn {
                            name: c.name,
                            type_: c.type_,
                            format: c.format,
                            description: c.description,
                            priority: c.priority,
                            json_path: c.json_path,
                        })
                        .collect(),
                    selectable_fields: v
                        .selectable_fields
                        .into_iter()
                        .map(|f| f.json_path)
                        .collect(),
                    deprecated: v.deprecated,
                    deprecation_warning: v.deprecation_warning,
                    name: v.name,
                })
            })
            .collect::<Result<Vec<_>, CrdError>>()?;
        let names = spec.names;
        Ok(Crd {
            list_kind: names.list_kind.unwrap_or_else(|| format!("{}List", names.kind)),
            singular: names.singular.unwrap_or_else(|| names.kind.to_lowercase()),
            kind: names.kind,
            plural: names.plural,
            short_names: names.short_names,
            categories: names.categories,
            group: spec.group,
            namespaced,
            versions,
        })
    }

    /// The CRD's object name, `plural.group`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// The version objects are stored in.
    ///
    /// # Panics
    ///
    /// If the CRD has no versions at all; [`Crd::from_yaml`] never builds such a CRD (it
    /// requires exactly one storage version).
    pub fn storage_version(&self) -> &CrdVersion {
        self.versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| self.versions.first())
            .expect("a CRD has a storage version: from_yaml rejects CRDs without exactly one")
    }

    /// The version of this name, served or not.
    pub fn version(&self, v: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|version| version.name == v)
    }
}

/// Schema properties the hub serves beyond OCM's CRDs, by CRD name (`plural.group`): each
/// file says what it adds and why.
const EXTENSIONS: &[(&str, &str)] = &[(
    "manifestworkreplicasets.work.open-cluster-management.io",
    include_str!("../crd-extensions/work.open-cluster-management.io_manifestworkreplicasets.yaml"),
)];

/// Merges a schema fragment into a schema: objects key by key, anything else replaced.
fn merge_schema(schema: &mut serde_json::Value, added: &serde_json::Value) {
    match (schema, added) {
        (serde_json::Value::Object(into), serde_json::Value::Object(from)) => {
            for (k, v) in from {
                match into.get_mut(k) {
                    Some(existing) => merge_schema(existing, v),
                    None => {
                        into.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (schema, added) => *schema = added.clone(),
    }
}

static OCM_CRDS: LazyLock<Vec<Crd>> = LazyLock::new(|| {
    CRD_SOURCES
        .iter()
        .map(|source| match Crd::extended(source, EXTENSIONS) {
            Ok(crd) => crd,
            // Our own embedded manifests; the unit test `all_embedded_crds_parse` guards this.
            Err(e) => panic!("embedded OCM CRD does not parse: {e}"),
        })
        .collect()
});

/// The OCM CRDs, parsed on first use.
///
/// # Panics
///
/// On first use, if an embedded manifest does not parse; a unit test proves they all do.
pub fn ocm_crds() -> &'static [Crd] {
    &OCM_CRDS
}

/// The OCM CRD serving `plural` in `group`.
pub fn find(group: &str, plural: &str) -> Option<&'static Crd> {
    ocm_crds().iter().find(|crd| crd.group == group && crd.plural == plural)
}

/// The OCM CRD of `kind` in `group`.
pub fn find_kind(group: &str, kind: &str) -> Option<&'static Crd> {
    ocm_crds().iter().find(|crd| crd.group == group && crd.kind == kind)
}

// The manifest shape, only the fields we use; serde ignores the rest.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCrd {
    api_version: String,
    kind: String,
    spec: RawSpec,
}

#[derive(Deserialize)]
struct RawSpec {
    group: String,
    names: RawNames,
    scope: String,
    versions: Vec<RawVersion>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNames {
    kind: String,
    list_kind: Option<String>,
    plural: String,
    singular: Option<String>,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawVersion {
    name: String,
    served: bool,
    storage: bool,
    #[serde(default)]
    deprecated: bool,
    deprecation_warning: Option<String>,
    schema: Option<RawValidation>,
    subresources: Option<RawSubresources>,
    #[serde(default)]
    additional_printer_columns: Vec<RawColumn>,
    #[serde(default)]
    selectable_fields: Vec<RawSelectableField>,
}

#[derive(Deserialize)]
struct RawValidation {
    #[serde(rename = "openAPIV3Schema")]
    open_api_v3_schema: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawSubresources {
    status: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawColumn {
    name: String,
    #[serde(rename = "type")]
    type_: String,
    format: Option<String>,
    description: Option<String>,
    #[serde(default)]
    priority: i32,
    json_path: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSelectableField {
    json_path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_embedded_crds_parse() {
        assert_eq!(CRD_SOURCES.len(), 20);
        for source in CRD_SOURCES {
            let crd = Crd::from_yaml(source).unwrap();
            assert_eq!(crd.versions.iter().filter(|v| v.storage).count(), 1, "{}", crd.name());
        }
        assert_eq!(ocm_crds().len(), 20);
        let mut names: Vec<String> = ocm_crds().iter().map(Crd::name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 20);
    }

    #[test]
    fn lookups() {
        let mc = find("cluster.open-cluster-management.io", "managedclusters").unwrap();
        assert_eq!(mc.kind, "ManagedCluster");
        assert!(find("cluster.open-cluster-management.io", "nope").is_none());
        let mw = find_kind("work.open-cluster-management.io", "ManifestWork").unwrap();
        assert_eq!(mw.plural, "manifestworks");
        assert!(mw.namespaced);
        assert!(mw.version("v1").is_some() && mw.version("v2").is_none());
    }

    #[test]
    fn rejects_what_is_not_a_served_crd() {
        let not_crd = "apiVersion: v1\nkind: ConfigMap\nspec:\n  group: g\n  names: {kind: K, \
                       plural: ks}\n  scope: Cluster\n  versions: []\n";
        assert!(matches!(Crd::from_yaml(not_crd), Err(CrdError::NotACrd { .. })));
        let no_storage = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                          spec:\n  group: g\n  names: {kind: K, plural: ks}\n  scope: Cluster\n  \
                          versions:\n  - {name: v1, served: true, storage: false}\n";
        assert!(matches!(
            Crd::from_yaml(no_storage),
            Err(CrdError::StorageVersions { count: 0, .. })
        ));
        assert!(matches!(Crd::from_yaml(": : :"), Err(CrdError::Yaml(_))));
    }
}
