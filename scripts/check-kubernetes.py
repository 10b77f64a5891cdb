"""Checks deploy/kubernetes/ and renders it for kubernetes-validate.

    check-kubernetes.py DIR OUT

Reads DIR/kustomization.yaml and renders what `kubectl apply -k DIR` would apply into OUT, one file per object,
for kubernetes-validate --strict: the resources with the kustomization's namespace, labels and images, and the
ConfigMap of each configMapGenerator (named <name>-<hash of its content>, the Deployment's reference rewritten
to it, as kustomize does; the hash itself is this script's, not kustomize's). Objects kubernetes-validate has no
schema for (KEDA's ScaledObject) are checked here instead of written.

It fails when the kustomization would break a cluster in a way the schema cannot see:
- a listed file is missing, or a Secret is applied (it would overwrite the operator's real Secret);
- the configuration is not a generated ConfigMap (a ConfigMap edited in place does not roll the pods);
- a Deployment has `replicas` beside a ScaledObject that scales it (the two fight on every apply);
- a Deployment uses static membership (KAFKA_GROUP_INSTANCE_ID or kafka.group_instance_id: the pod name changes
  on every rollout and a static member never leaves the group);
- the pod spec injects service links or mounts a service-account token the worker does not need;
- the PodDisruptionBudget blocks the eviction of unready pods (node drains during a Gamebase outage);
- the ScaledObject does not scale this Deployment on this consumer group and purchases topic;
- a Service or PodDisruptionBudget selects no pod of the Deployment.
"""
import copy
import hashlib
import pathlib
import sys

import yaml

directory, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
failures = []


def fail(message):
    failures.append(message)


kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
objects = []
for resource in kustomization.get("resources", []):
    path = directory / resource
    if not path.exists():
        fail(f"kustomization.yaml lists {resource}, which does not exist")
        continue
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            objects.append((resource, document))

# configMapGenerator -> ConfigMaps with a content hash in their name
generated_names = {}
configuration = None
for generator in kustomization.get("configMapGenerator", []):
    data = {}
    for entry in generator.get("files", []):
        key, _, source = entry.rpartition("=") if "=" in entry else (pathlib.Path(entry).name, "", entry)
        path = directory / source
        if not path.exists():
            fail(f"configMapGenerator {generator['name']}: {source} does not exist")
            continue
        data[key] = path.read_text()
        if key.endswith((".yaml", ".yml")):
            parsed = yaml.safe_load(data[key])  # a YAML error fails the check here
            if key == "iap-worker.yaml":
                configuration = parsed
    digest = hashlib.sha256(yaml.safe_dump(data, sort_keys=True).encode()).hexdigest()[:10]
    name = f"{generator['name']}-{digest}"
    generated_names[generator["name"]] = name
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    objects.append(("configMapGenerator", config_map))
if configuration is None:
    fail("kustomization.yaml: no configMapGenerator makes iap-worker.yaml (the configuration must roll the pods)")

for resource, document in objects:
    kind, name = document.get("kind"), document.get("metadata", {}).get("name")
    if kind == "Secret":
        fail(f"{resource}: the kustomization applies Secret {name}, overwriting the operator's real one")
    if kind == "ConfigMap" and resource != "configMapGenerator":
        fail(f"{resource}: ConfigMap {name} is a plain resource; "
             "generate it (configMapGenerator) so changes roll the pods")

# kustomize's transformations
labels = {}
for entry in kustomization.get("labels", []):
    labels.update(entry.get("pairs", {}))
images = {image["name"]: image for image in kustomization.get("images", [])}
rendered = []
for resource, document in objects:
    document = copy.deepcopy(document)
    metadata = document.setdefault("metadata", {})
    if "namespace" in kustomization:
        metadata["namespace"] = kustomization["namespace"]
    metadata.setdefault("labels", {}).update(labels)
    pod = document.get("spec", {}).get("template", {}).get("spec")
    if pod:
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            image = images.get(container.get("image", "").split(":")[0])
            if image:
                container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                reference = volume["configMap"]["name"]
                if reference in generated_names:
                    volume["configMap"]["name"] = generated_names[reference]
                elif not any(o.get("kind") == "ConfigMap" and o["metadata"]["name"] == reference for _, o in objects):
                    fail(f"{resource}: volume {volume['name']} mounts ConfigMap {reference}, which nothing here makes")
    rendered.append((resource, document))

deployments = {d["metadata"]["name"]: (r, d) for r, d in rendered if d.get("kind") == "Deployment"}
scaled = {}
for resource, document in rendered:
    if document.get("kind") != "ScaledObject":
        continue
    spec = document["spec"]
    target = spec.get("scaleTargetRef", {})
    if target.get("kind", "Deployment") != "Deployment" or target.get("name") not in deployments:
        fail(f"{resource}: the ScaledObject scales {target.get('kind', 'Deployment')} {target.get('name')}, "
             "not a Deployment here")
    else:
        scaled[target["name"]] = spec
    if not spec.get("minReplicaCount", 0) >= 1:
        fail(f"{resource}: minReplicaCount must be at least 1 (it replaces the Deployment's replicas)")
    kafka = [t for t in spec.get("triggers", []) if t.get("type") == "kafka"]
    if not kafka:
        fail(f"{resource}: no kafka trigger")
    elif configuration:
        trigger = kafka[0]["metadata"]
        kafka_config = configuration.get("kafka", {})
        expected = {
            "consumerGroup": kafka_config.get("group_id", "iap-worker"),
            "topic": kafka_config.get("topics", {}).get("purchases", "purchase.completed"),
        }
        for key, value in expected.items():
            if trigger.get(key) != value:
                fail(f"{resource}: trigger {key} is {trigger.get(key)!r}; the worker uses {value!r}")

for name, (resource, deployment) in deployments.items():
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    if name in scaled and "replicas" in spec:
        fail(f"{resource}: Deployment {name} sets replicas beside a ScaledObject; let minReplicaCount set the floor")
    if pod.get("enableServiceLinks") is not False:
        fail(f"{resource}: enableServiceLinks must be false")
    if pod.get("automountServiceAccountToken") is not False:
        fail(f"{resource}: automountServiceAccountToken must be false")
    for container in pod["containers"]:
        if any(env.get("name") == "KAFKA_GROUP_INSTANCE_ID" for env in container.get("env", [])):
            fail(f"{resource}: a Deployment with static membership (KAFKA_GROUP_INSTANCE_ID) stalls partitions "
                 "on every rollout and scale-in")
    template_labels = spec["template"]["metadata"].get("labels", {})
    for other_resource, other in rendered:
        selector = other.get("spec", {}).get("selector")
        if other.get("kind") == "Service":
            match = selector or {}
        elif other.get("kind") == "PodDisruptionBudget":
            match = (selector or {}).get("matchLabels", {})
        else:
            continue
        if not match or any(template_labels.get(k) != v for k, v in match.items()):
            fail(f"{other_resource}: {other['kind']} {other['metadata']['name']} selects no pod of Deployment {name}")
        policy = other["spec"].get("unhealthyPodEvictionPolicy")
        if other.get("kind") == "PodDisruptionBudget" and policy != "AlwaysAllow":
            fail(f"{other_resource}: unhealthyPodEvictionPolicy must be AlwaysAllow "
                 "(all pods are unready while Gamebase is down)")
if configuration and configuration.get("kafka", {}).get("group_instance_id"):
    fail("the configuration sets kafka.group_instance_id: static membership in a Deployment stalls partitions")
if not deployments:
    fail("kustomization.yaml applies no Deployment")

for index, (resource, document) in enumerate(rendered):
    if document.get("kind") == "ScaledObject":
        continue  # no schema in kubernetes-validate; checked above
    name = f"{index:02d}-{document['kind'].lower()}-{document['metadata']['name']}.yaml"
    (out / name).write_text(yaml.safe_dump(document, sort_keys=False))

if failures:
    print("\n".join(f"FAIL {failure}" for failure in failures), file=sys.stderr)
    sys.exit(f"{directory}: {len(failures)} problems")
print(f"ok  {directory}/kustomization.yaml ({len(rendered)} objects rendered into {out})")
