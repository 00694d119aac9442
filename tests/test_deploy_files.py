"""The deployment files parse and agree (no podman, no cluster, no helm needed): the Containerfile's
contract (base argument, non-root user, `byref` entrypoint, /healthz healthcheck), compose.yaml's
topology (three gateway replicas, PostgreSQL, HAProxy on 127.0.0.1 checking /readyz, secrets from
the environment), the Kubernetes manifests (kinds, probes, no session affinity), the gateway
configs each ships (checked by byref's own config parser), and the Helm chart's templates, which
render the same objects with the same fields as the plain manifests (rendered here by replacing
each `{{ … }}` with a placeholder: every template keeps its expressions to scalars)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from byref.gateway.config.file import parse_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KINDS = {"ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget",
         "HorizontalPodAutoscaler"}


def test_containerfile_contract() -> None:
    text = (ROOT / "Containerfile").read_text()
    assert re.findall(r"^ARG BASE.*", text, re.M) == ["ARG BASE=python:3.12-slim"]
    assert len(re.findall(r"^FROM \$\{BASE\}", text, re.M)) == 2  # multi-stage, same base
    assert "USER 10001" in text and 'ENTRYPOINT ["byref"]' in text
    assert re.search(r"HEALTHCHECK .*\n.*/healthz", text)
    assert "ARG EMBEDDINGS" in text and "ARG EXTRAS=mcp,postgres,s3,metrics,auth" in text
    ignored = (ROOT / ".containerignore").read_text().split()
    assert ignored[ignored.index("*"):][:4] == ["*", "!pyproject.toml", "!README.md", "!src"]


def test_compose_topology() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "gateway-1", "gateway-2", "gateway-3", "haproxy"}
    for name in ("gateway-1", "gateway-2", "gateway-3"):
        gateway = services[name]
        assert (DEPLOY / gateway["build"]["context"] / gateway["build"]["dockerfile"]).exists()
        assert gateway["environment"]["PGPASSWORD"].startswith("${BYREF_DB_PASSWORD:?")
        assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
        assert gateway["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${BYREF_DB_PASSWORD:?")
    assert services["haproxy"]["ports"] == ["127.0.0.1:8848:8848"]
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    assert "balance roundrobin" in cfg and "option httpchk GET /readyz" in cfg
    rules = "\n".join(line for line in cfg.splitlines() if not line.lstrip().startswith("#"))
    assert "cookie" not in rules and "stick" not in rules  # no sticky sessions
    assert re.findall(r"^\s*server \w+ ([\w-]+):8848", cfg, re.M) == [
        "gateway-1", "gateway-2", "gateway-3"]
    config = parse_config(json.loads((DEPLOY / "gateway.json").read_text()))
    assert config.replicas and str(config.state).startswith("postgresql://")


def _plain() -> dict[str, dict[str, Any]]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((DEPLOY / "k8s").glob("*.yaml"))]
    return {d["kind"]: d for d in docs}


def test_kubernetes_manifests() -> None:
    objects = _plain()
    assert set(objects) == KINDS
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (gateway,) = pod["containers"]
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert gateway["envFrom"][0]["secretRef"]["name"] == objects["Secret"]["metadata"]["name"]
    assert "sessionAffinity" not in objects["Service"]["spec"]
    config = json.loads(objects["ConfigMap"]["data"]["gateway.json"])
    assert parse_config(config).replicas


def _render(template: str) -> Any:
    """A template with every action replaced by a placeholder and control lines dropped."""
    lines = [line for line in template.splitlines()
             if not re.fullmatch(r"\s*\{\{-?\s*(if|end|range|else)\b.*\}\}\s*", line)]
    return yaml.safe_load(re.sub(r"\{\{.*?\}\}", "X", "\n".join(lines)))


def _paths(node: Any, at: str = "") -> set[str]:
    if isinstance(node, dict):
        return {p for k, v in node.items() for p in _paths(v, f"{at}.{k}")} | {at}
    if isinstance(node, list):
        return {p for v in node for p in _paths(v, f"{at}[]")} | {at}
    return {at}


HELM_ONLY = re.compile(r".*(app\.kubernetes\.io/instance|annotations|checksum/config).*")
"""Fields the chart adds: its release's label and the config checksum that rolls the pods."""


def test_helm_chart_renders_the_plain_manifests() -> None:
    chart = DEPLOY / "helm" / "byref"
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["apiVersion"] == "v2"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert parse_config(values["config"]).replicas
    rendered = {d["kind"]: d for d in (_render(p.read_text())
                                       for p in sorted((chart / "templates").glob("*.yaml")))}
    plain = _plain()
    assert set(rendered) == set(plain) == KINDS
    for kind, obj in plain.items():
        # A Secret's keys come from values (secretEnv): compare its shape, not its key names.
        ours, theirs = ({re.sub(r"^\.stringData\..+", ".stringData.*", p) for p in _paths(o)}
                        for o in (obj, rendered[kind]))
        assert ours <= theirs, (kind, ours - theirs)
        assert all(HELM_ONLY.fullmatch(p) for p in theirs - ours), (kind, theirs - ours)
    pod = rendered["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert pod["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["livenessProbe"]["httpGet"]["path"] == "/healthz"
