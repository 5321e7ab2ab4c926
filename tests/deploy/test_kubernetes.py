"""``deploy/kubernetes/``: the manifests, alone and with each kustomize component, against the
Kubernetes schemas (a vendored subset: tests/fixtures/kubernetes/README.md) and against the
code: the variables they set are settings, the commands start with the image's entry point,
the workers follow the CPU limit, the probes answer on a real ``switchboard serve`` and it
stops within the grace period."""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from cryptography.fernet import Fernet

from registry.settings import Settings
from router.cli import build_parser
from router.cli.running import ARRIVAL_WAIT, CANCEL_WAIT
from router.cpus import available_cpus
from tests.deploy.conftest import ROOT, Image, Served
from tests.support.helpers import FIXTURES

KUBERNETES = ROOT / "deploy" / "kubernetes"
SCHEMAS = FIXTURES / "kubernetes"
VERSIONS = ("v1.30.0", "v1.37.0")  # the oldest Kubernetes the manifests are for, the newest
CUSTOM = ("servicemonitor-v0.93.0.json",)
RENDERINGS: dict[str, tuple[str, ...]] = {
    "base": (),
    "servicemonitor": ("servicemonitor",),
    "grpc": ("grpc",),
    "metrics-port": ("metrics-port",),
    "all": ("servicemonitor", "grpc", "metrics-port"),
}
"""The base, and overlays that add components in this order."""
ADMIN, READ = "admin-token-for-the-test", "read-token-for-the-test"
SETTINGS = {
    f"{Settings.model_config.get('env_prefix', '')}{name}".upper() for name in Settings.model_fields
}


# --- reading the manifests as kustomize would ----------------------------------------------


def _load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _apply(document: dict[str, Any], operations: list[dict[str, Any]]) -> None:
    """A JSON patch (RFC 6902) of ``add`` and ``replace`` operations, in place."""
    for operation in operations:
        *parents, last = _pointer(operation["path"])
        node: Any = document
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        value = copy.deepcopy(operation["value"])
        if operation["op"] == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), value)
        elif operation["op"] == "add":
            node[last] = value
        elif operation["op"] == "replace":
            assert (int(last) < len(node)) if isinstance(node, list) else last in node, operation
            node[int(last) if isinstance(node, list) else last] = value
        else:
            raise AssertionError(f"an operation these tests do not apply: {operation}")


@functools.cache
def _render(components: tuple[str, ...]) -> tuple[str, ...]:
    """The documents of the base plus ``components`` (their resources, then their patches on
    whatever matches kind and name: none is no error, as with kustomize), as JSON texts."""
    base = yaml.safe_load((KUBERNETES / "Kustomization").read_text(encoding="utf-8"))
    docs = [doc for name in base["resources"] for doc in _load(KUBERNETES / name)]
    for component in components:
        folder = KUBERNETES / "components" / component
        spec = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))
        assert spec["kind"] == "Component"
        docs += [doc for name in spec.get("resources", []) for doc in _load(folder / name)]
        for patch in spec.get("patches", []):
            operations = yaml.safe_load(patch["patch"])
            assert isinstance(operations, list), "JSON patches only"
            for doc in docs:
                target = patch["target"]
                if doc["kind"] == target["kind"] and doc["metadata"]["name"] == target["name"]:
                    _apply(doc, operations)
    return tuple(json.dumps(doc, sort_keys=True) for doc in docs)


def render(name: str) -> list[dict[str, Any]]:
    """The documents of the rendering ``name`` (:data:`RENDERINGS`), a fresh copy."""
    return [json.loads(text) for text in _render(RENDERINGS[name])]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [doc] = [doc for doc in docs if doc["kind"] == kind]
    return doc


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every container of the Deployment and the Job."""
    return [
        container
        for doc in docs
        if doc["kind"] in ("Deployment", "Job")
        for container in _pod(doc)["containers"]
    ]


def _environment(
    container: dict[str, Any], config: Mapping[str, str], secrets: Mapping[str, str]
) -> dict[str, str]:
    """The variables ``container`` starts with: the ConfigMap, then its ``env``: values,
    the ``secrets`` it names (an optional one may be missing), its CPU limit in whole CPUs."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == "switchboard"
        env |= config
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        elif "secretKeyRef" in item["valueFrom"]:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "switchboard"
            if ref["key"] in secrets:
                env[item["name"]] = secrets[ref["key"]]
            else:
                assert ref.get("optional"), f"the Secret must hold {ref['key']}"
        else:
            field = item["valueFrom"]["resourceFieldRef"]
            assert field == {"containerName": container["name"], "resource": "limits.cpu",
                             "divisor": "1"}, field  # fmt: skip
            env[item["name"]] = str(_cpus(container["resources"]["limits"]["cpu"]))
    return env


def _cpus(quantity: str) -> int:
    """A CPU quantity in whole CPUs, rounded up (as the downward API gives it, divisor 1)."""
    text = str(quantity)
    return math.ceil(int(text[:-1]) / 1000 if text.endswith("m") else float(text))


# --- schemas ---------------------------------------------------------------------------------


@functools.cache
def _schemas(version: str) -> dict[tuple[str, str, str], jsonschema.Draft202012Validator]:
    """A validator per (group, version, kind): the version's definitions and the vendored
    custom resources' schemas."""
    document = json.loads((SCHEMAS / f"{version}.json").read_text(encoding="utf-8"))
    validators = {}
    for name, definition in document["$defs"].items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            schema = {"$ref": f"#/$defs/{name}", "$defs": document["$defs"]}
            validators[(gvk["group"], gvk["version"], gvk["kind"])] = (
                jsonschema.Draft202012Validator(schema)
            )
    for custom in CUSTOM:
        schema = json.loads((SCHEMAS / custom).read_text(encoding="utf-8"))
        [gvk] = schema["x-kubernetes-group-version-kind"]
        validators[(gvk["group"], gvk["version"], gvk["kind"])] = jsonschema.Draft202012Validator(
            schema
        )
    return validators


def _problems(doc: dict[str, Any], version: str) -> list[str]:
    group, _, api_version = doc["apiVersion"].rpartition("/")
    validator = _schemas(version).get((group, api_version, doc["kind"]))
    if validator is None:
        return [f"no schema for {doc['apiVersion']} {doc['kind']}"]
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(doc)]


# --- the tests -------------------------------------------------------------------------------


def test_the_kustomization_lists_every_manifest_and_kubectl_apply_f_reads_only_them() -> None:
    """``kubectl apply -f deploy/kubernetes/`` applies every ``.yaml``, ``.yml`` and ``.json``
    file of the folder (not its subfolders): kustomize's own file is named ``Kustomization``,
    which it reads and ``kubectl apply -f`` does not."""
    listed = yaml.safe_load((KUBERNETES / "Kustomization").read_text(encoding="utf-8"))
    files = sorted(p.name for p in KUBERNETES.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    assert sorted(listed["resources"]) == files
    for path in files:
        for doc in _load(KUBERNETES / path):
            assert doc["kind"] not in ("Kustomization", "Component", "Secret"), path


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_manifest_is_valid_for_kubernetes(rendering: str, version: str) -> None:
    problems = {
        f"{doc['kind']}/{doc['metadata']['name']}": _problems(doc, version)
        for doc in render(rendering)
    }
    assert {name: found for name, found in problems.items() if found} == {}


def test_the_schemas_are_strict() -> None:
    """A misspelled field, a wrong type and a missing required field are each refused (the
    API server would drop or refuse them), in a Deployment and in the ServiceMonitor."""
    docs = render("servicemonitor")
    deployment, monitor = _one(docs, "Deployment"), _one(docs, "ServiceMonitor")
    container = _pod(deployment)["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "25"
    del deployment["spec"]["selector"]
    monitor["spec"]["endpoints"][0]["bearerTokenSecrett"] = {}
    for version in VERSIONS:
        found = " ".join(_problems(deployment, version) + _problems(monitor, version))
        for word in ("readinesProbe", "'25' is not of type", "'selector' is a required",
                     "bearerTokenSecrett"):  # fmt: skip
            assert word in found, (version, found)


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_every_variable_set_is_a_setting_and_their_values_are_valid(
    rendering: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = render(rendering)
    config = _one(docs, "ConfigMap")["data"]
    named = set(config) | {item["name"] for c in _containers(docs) for item in c.get("env", [])}
    assert named - SETTINGS == set(), "not settings (registry/settings.py)"
    secrets = {
        "SWITCHBOARD_DATABASE_URL": "postgresql://switchboard:secret@db.example.com:5432/sb",
        "SWITCHBOARD_ADMIN_TOKEN": ADMIN,
        "SWITCHBOARD_READ_TOKEN": READ,
        "SWITCHBOARD_SECRET_KEY": Fernet.generate_key().decode(),
        "SWITCHBOARD_JWT_ISSUER": "https://login.example.com/",
        "SWITCHBOARD_JWT_AUDIENCE": "switchboard",
        "SWITCHBOARD_JWT_JWKS_URL": "https://login.example.com/jwks.json",
    }
    for name in [n for n in os.environ if n.startswith("SWITCHBOARD_")]:
        monkeypatch.delenv(name)
    for container in _containers(docs):
        with monkeypatch.context() as env:
            for name, value in _environment(container, config, secrets).items():
                env.setenv(name, value)
            Settings()  # raises on a value serve would refuse


def test_the_secret_is_only_referenced_and_the_servicemonitor_reads_a_key_of_it() -> None:
    docs = render("servicemonitor")
    assert not [doc for doc in docs if doc["kind"] == "Secret"]
    keys = {
        item["valueFrom"]["secretKeyRef"]["key"]
        for container in _containers(docs)
        for item in container.get("env", [])
        if "secretKeyRef" in item.get("valueFrom", {})
    }
    assert {"SWITCHBOARD_DATABASE_URL", "SWITCHBOARD_ADMIN_TOKEN"} <= keys
    [endpoint] = _one(docs, "ServiceMonitor")["spec"]["endpoints"]
    credentials = endpoint["authorization"]["credentials"]
    assert credentials == {"name": "switchboard", "key": "SWITCHBOARD_READ_TOKEN"}
    assert credentials["key"] in keys


@pytest.mark.parametrize("rendering", ["base", "all"])
def test_every_command_starts_with_the_image_entry_point(rendering: str, image: Image) -> None:
    """Each container's command begins with the image's ``ENTRYPOINT`` (else ``CMD``'s
    program), and is a command the CLI has; the server's is the image's ``CMD``."""
    docs = render(rendering)
    for container in _containers(docs):
        command = container["command"]
        assert command[: len(image.entrypoint)] == image.entrypoint, command
        assert "args" not in container
        args = build_parser().parse_args(command[len(image.entrypoint) :])
        assert callable(getattr(args, "func", None)), command
    assert _pod(_one(docs, "Deployment"))["containers"][0]["command"] == image.cmd
    [server] = _pod(_one(docs, "Deployment"))["containers"]
    [job] = _pod(_one(docs, "Job"))["containers"]
    assert job["command"][1:] == ["db", "upgrade"]
    assert job["image"] == server["image"], "the migration runs the version it migrates for"


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_workers_follow_the_cpu_limit(rendering: str, tmp_path: Path) -> None:
    """``SWITCHBOARD_WORKERS`` is the container's CPU limit in whole CPUs (the downward API);
    ``serve`` would pick as many without it, from the cgroup's quota (router/cpus.py)."""
    [container] = _pod(_one(render(rendering), "Deployment"))["containers"]
    resources = container["resources"]
    assert resources["requests"] == resources["limits"], "Guaranteed QoS: no CPU overcommit"
    workers = _environment(
        container, {}, {"SWITCHBOARD_DATABASE_URL": "", "SWITCHBOARD_ADMIN_TOKEN": ""}
    )
    limit = _cpus(resources["limits"]["cpu"])
    assert workers["SWITCHBOARD_WORKERS"] == str(limit)
    (tmp_path / "cpu.max").write_text(f"{limit * 100000} 100000\n")
    assert available_cpus(tmp_path) == min(limit, len(os.sched_getaffinity(0)))


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_the_grace_period_covers_the_drain(rendering: str) -> None:
    """The kubelet sends SIGTERM after ``preStop`` and SIGKILL at the end of the grace period:
    in between ``serve`` stops listening, waits for the requests on their way in, gives the
    requests in progress SWITCHBOARD_SHUTDOWN_GRACE, then its cancelled tasks CANCEL_WAIT."""
    docs = render(rendering)
    pod = _pod(_one(docs, "Deployment"))
    [container] = pod["containers"]
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep" and 0 < int(sleep[1]) <= 15
    grace = float(_one(docs, "ConfigMap")["data"]["SWITCHBOARD_SHUTDOWN_GRACE"])
    drain = int(sleep[1]) + ARRIVAL_WAIT + grace + CANCEL_WAIT
    assert drain + 2 <= pod["terminationGracePeriodSeconds"] <= drain + 15


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_selectors_and_ports_agree(rendering: str) -> None:
    """The Service, PodDisruptionBudget, HPA and ServiceMonitor reach the server's pods and
    not the migration's; every port ``serve`` binds is declared, exposed by the Service where
    it is a port for clients, and let in by the NetworkPolicy; the scrape annotation names the
    port /metrics is on, which with a metrics port must be the pod's only one."""
    docs = render(rendering)
    deployment, job = _one(docs, "Deployment"), _one(docs, "Job")
    server = deployment["spec"]["template"]["metadata"]["labels"]
    migration = job["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return selector.items() <= labels.items()

    assert deployment["spec"]["selector"]["matchLabels"] == server
    budget = _one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    for kind, selector in (("Service", _one(docs, "Service")["spec"]["selector"]), ("PDB", budget)):
        assert selects(selector, server) and not selects(selector, migration), kind
    policy = _one(docs, "NetworkPolicy")["spec"]
    assert selects(policy["podSelector"]["matchLabels"], server)
    assert selects(policy["podSelector"]["matchLabels"], migration)
    target = _one(docs, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])

    [container] = _pod(deployment)["containers"]
    config = _one(docs, "ConfigMap")["data"]
    declared = {port["name"]: port["containerPort"] for port in container["ports"]}
    workers = _cpus(container["resources"]["limits"]["cpu"])
    metrics = int(config.get("SWITCHBOARD_METRICS_PORT", 0))
    binds = {int(config["SWITCHBOARD_PORT"])}
    binds |= {int(config["SWITCHBOARD_GRPC_PORT"])} if "SWITCHBOARD_GRPC_PORT" in config else set()
    binds |= set(range(metrics, metrics + workers)) if metrics else set()
    assert set(declared.values()) == binds
    service_ports = _one(docs, "Service")["spec"]["ports"]
    assert {port["targetPort"] for port in service_ports} <= set(declared)
    allowed = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
    assert binds <= allowed
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert declared[container[probe]["httpGet"]["port"]] == int(config["SWITCHBOARD_PORT"])

    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    scraped = int(annotations["prometheus.io/port"])
    assert scraped == (metrics or int(config["SWITCHBOARD_PORT"]))
    if metrics:
        assert workers == 1, "worker i serves /metrics on port + i: one annotation, one worker"
    monitors = [doc for doc in docs if doc["kind"] == "ServiceMonitor"]
    for monitor in monitors:
        assert selects(
            monitor["spec"]["selector"]["matchLabels"], _one(docs, "Service")["metadata"]["labels"]
        )
        [endpoint] = monitor["spec"]["endpoints"]
        [port] = [p for p in service_ports if p["name"] == endpoint["port"]]
        assert declared[port["targetPort"]] == scraped


@pytest.mark.parametrize("rendering", ["base", "all"])
def test_the_pods_run_locked_down(rendering: str, image: Image) -> None:
    """Non-root as the image's user, no privilege escalation, no capability, the runtime's
    seccomp profile, a read-only root with a writable /tmp, no service account token."""
    docs = render(rendering)
    for workload in (_one(docs, "Deployment"), _one(docs, "Job")):
        pod = _pod(workload)
        assert pod["automountServiceAccountToken"] is False
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == image.uid
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]]
    assert _one(docs, "ServiceAccount")["automountServiceAccountToken"] is False


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("rendering", RENDERINGS)
def test_kubectl_kustomize_renders_what_these_tests_read(rendering: str, tmp_path: Path) -> None:
    """``kubectl kustomize`` (kustomize itself) of an overlay with these components gives the
    documents the other tests read."""
    relative = os.path.relpath(KUBERNETES, tmp_path)
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative],
        "components": [f"{relative}/components/{name}" for name in RENDERINGS[rendering]],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    done = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr

    def key(doc: dict[str, Any]) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    rendered = sorted((d for d in yaml.safe_load_all(done.stdout) if d), key=key)
    assert rendered == sorted(render(rendering), key=key)


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_probes_answer_and_the_pod_stops_within_its_grace_period(
    db_url: str,
    run_command: Callable[[Sequence[str], Mapping[str, str]], Awaitable[str]],
    serve: Callable[[Sequence[str], Mapping[str, str]], Awaitable[Served]],
) -> None:
    """The migration Job's command, then the Deployment's, with their variables (the Secret's
    filled in, loopback and a free port instead of 0.0.0.0:8080): every probe answers 200,
    the scrape the annotations ask for answers with the read token (client authentication is
    on), and SIGTERM stops every worker within the grace period less the preStop pause."""
    docs = render("base")
    config = _one(docs, "ConfigMap")["data"]
    secrets = {
        "SWITCHBOARD_DATABASE_URL": db_url,
        "SWITCHBOARD_ADMIN_TOKEN": ADMIN,
        "SWITCHBOARD_READ_TOKEN": READ,
    }
    [job] = _pod(_one(docs, "Job"))["containers"]
    migrated = await run_command(job["command"], _environment(job, config, secrets))
    assert "upgraded from revision none to" in migrated

    pod = _pod(_one(docs, "Deployment"))
    [container] = pod["containers"]
    env = _environment(container, config, secrets)
    assert int(env["SWITCHBOARD_WORKERS"]) >= 2  # a supervisor and its workers, as deployed
    served = await serve(
        container["command"], env | {"SWITCHBOARD_HOST": "127.0.0.1", "SWITCHBOARD_PORT": "0"}
    )
    base = f"http://127.0.0.1:{served.port}"
    annotations = _one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            answer = await http.get(container[probe]["httpGet"]["path"])
            assert answer.status_code == 200, (probe, answer.text)
        scrape = annotations["prometheus.io/path"]
        assert (await http.get(scrape)).status_code == 401
        metrics = await http.get(scrape, headers={"Authorization": f"Bearer {READ}"})
        assert metrics.status_code == 200 and "switchboard_streams_open" in metrics.text
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    code = await served.stop(pod["terminationGracePeriodSeconds"] - pause)
    assert code == 0, served.output.text
    assert "Traceback" not in served.output.text, served.output.text
