"""The compose stack is the scale-out test's topology, checked without a container engine:
3 collectors and 2 viewers, one S3 store and one PostgreSQL catalog, the gateway in front."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
GATEWAY = yaml.safe_load((REPO / "collector" / "gateway.yaml").read_text())
SERVICES = COMPOSE["services"]
COLLECTORS = sorted(name for name in SERVICES if name.startswith("collector-"))
VIEWERS = sorted(name for name in SERVICES if name.startswith("viewer-"))


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_three_collectors_and_two_viewers_behind_the_gateway():
    assert (len(COLLECTORS), len(VIEWERS)) == (3, 2)  # as tests/scaleout/test_scale_out.py runs them
    hostnames = GATEWAY["exporters"]["loadbalancing"]["resolver"]["static"]["hostnames"]
    assert sorted(host.split(":")[0] for host in hostnames) == COLLECTORS
    for name in COLLECTORS:
        assert SERVICES[name]["command"][:2] == ["otel-session", "collect"]
        assert SERVICES["gateway"]["depends_on"][name]["condition"] == "service_healthy"
    for name in VIEWERS:
        assert SERVICES[name]["command"][:2] == ["otel-session", "view"]


def test_every_collector_and_viewer_shares_one_catalog_and_one_store_with_a_volume_and_origin_of_its_own():
    environments = [SERVICES[name]["environment"] for name in COLLECTORS + VIEWERS]
    assert len({env["OTEL_SESSION_CATALOG"] for env in environments}) == 1
    assert len({env["OTEL_SESSION_STORE"] for env in environments}) == 1
    assert len({env["OTEL_SESSION_ORIGIN"] for env in environments}) == len(environments)
    assert len({env["OTEL_SESSION_REDACTION_KEY"] for name, env in zip(COLLECTORS + VIEWERS, environments)
                if name in COLLECTORS}) == 1
    catalog = urlsplit(environments[0]["OTEL_SESSION_CATALOG"])
    assert catalog.scheme == "postgresql" and catalog.hostname == "postgres" and catalog.port == 5432
    assert catalog.path.lstrip("/") == SERVICES["postgres"]["environment"]["POSTGRES_DB"]
    assert catalog.username == SERVICES["postgres"]["environment"]["POSTGRES_USER"]
    store = urlsplit(environments[0]["OTEL_SESSION_STORE"])
    assert store.scheme == "s3"
    assert f"-name {store.hostname}" in " ".join(SERVICES["store-init"]["command"])  # its bucket is made
    endpoint = urlsplit(environments[0]["AWS_ENDPOINT_URL"])
    assert endpoint.hostname == "seaweedfs" and f"-s3.port={endpoint.port}" in SERVICES["seaweedfs"]["command"]
    volumes = [SERVICES[name]["volumes"][0].split(":") for name in COLLECTORS + VIEWERS]
    assert len({volume for volume, _ in volumes}) == len(volumes) and {v for v, _ in volumes} <= set(COMPOSE["volumes"])
    for name, (_, target) in zip(COLLECTORS + VIEWERS, volumes):
        assert _option(SERVICES[name]["command"], "--dir") == target
        for needed in ("postgres", "store-init"):
            assert needed in SERVICES[name]["depends_on"]


def test_the_image_has_the_catalog_and_store_clients():
    install = next(line for line in (REPO / "Dockerfile").read_text().splitlines() if "pip install" in line)
    assert "postgres" in install and "s3" in install
