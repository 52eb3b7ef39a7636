"""The compose stack, checked without a container engine: files, commands, names and ports line up."""

from __future__ import annotations

import re
import subprocess
from urllib.parse import urlsplit

import pytest
import yaml

from .conftest import REPO, otel_session_cli

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
GATEWAY = yaml.safe_load((REPO / "collector" / "gateway.yaml").read_text())
SERVICES = COMPOSE["services"]
OWN_SERVICES = sorted(name for name, service in SERVICES.items() if "build" in service)


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_the_topology_has_every_service():
    assert set(SERVICES) == {"agent", "llm", "gateway", "collector-1", "collector-2", "collector-3", "postgres",
                             "seaweedfs", "store-init", "jaeger", "viewer-1", "viewer-2", "driver"}
    assert SERVICES["gateway"]["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert SERVICES["jaeger"]["image"].startswith("jaegertracing/all-in-one:")


@pytest.mark.parametrize("name", OWN_SERVICES)
def test_build_context_and_dockerfile_exist(name):
    build = SERVICES[name]["build"]
    context = REPO / build["context"]
    dockerfile = context / build.get("dockerfile", "Dockerfile")
    assert context.is_dir() and dockerfile.is_file()
    for line in dockerfile.read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (context / source).exists(), f"{dockerfile.name} copies missing {source}"


@pytest.mark.parametrize("name", OWN_SERVICES)
def test_every_command_exists_with_the_options_it_uses(name):
    command = SERVICES[name]["command"]
    assert command[0] == "otel-session"
    words = [word for word in command[1:] if not word.startswith("-")]
    path = []
    for word in words:  # the subcommand path: words before the first option
        if command.index(word) != len(path) + 1:
            break
        path.append(word)
    shown = subprocess.run(otel_session_cli(*path, "--help"), capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    for option in (word for word in command if word.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(option)}\b", shown.stdout), f"{' '.join(path)} has no {option}"


def test_the_gateway_routes_by_trace_id_to_every_collector():
    pipeline = GATEWAY["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    assert set(pipeline["exporters"]) == {"loadbalancing", "otlp/jaeger"}
    # GenAI message events sent as logs must reach the collector that holds their trace's run.
    assert GATEWAY["service"]["pipelines"]["logs"]["exporters"] == ["loadbalancing"]
    balancer = GATEWAY["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "traceID"  # for logs too (the exporter's default there is service)
    hostnames = balancer["resolver"]["static"]["hostnames"]
    assert sorted(host.split(":")[0] for host in hostnames) == sorted(name for name in SERVICES if name.startswith("collector-"))
    for host in hostnames:  # the gateway speaks OTLP/gRPC to each collector's --grpc port
        service, port = host.split(":")
        assert _port(_option(SERVICES[service]["command"], "--grpc")) == int(port)


def test_jaeger_receives_otlp_from_the_gateway():
    endpoint = GATEWAY["exporters"]["otlp/jaeger"]["endpoint"]
    host, port = endpoint.split(":")
    assert host == "jaeger" and port == "4317"  # all-in-one's OTLP/gRPC port


def test_the_agent_talks_to_the_llm_and_the_gateway_and_the_driver_to_the_agent():
    agent = SERVICES["agent"]["command"]
    llm = urlsplit(_option(agent, "--llm"))
    assert llm.hostname == "llm" and llm.port == int(_option(SERVICES["llm"]["command"], "--port"))
    otlp = urlsplit(_option(agent, "--otlp-endpoint"))
    assert otlp.hostname == "gateway" and otlp.path == "/v1/traces"
    assert otlp.port == _port(GATEWAY["receivers"]["otlp"]["protocols"]["http"]["endpoint"])
    target = urlsplit(_option(SERVICES["driver"]["command"], "--agent"))
    assert target.hostname == "agent" and target.port == int(_option(agent, "--port"))


def test_the_gateway_config_is_mounted_where_it_is_read():
    gateway = SERVICES["gateway"]
    config_path = gateway["command"][0].split("=", 1)[1]
    source, target = gateway["volumes"][0].split(":")[:2]
    assert target == config_path
    assert (REPO / source).resolve() == (REPO / "collector" / "gateway.yaml").resolve()


def test_published_ports_bind_loopback_and_the_viewer_needs_a_token():
    for name, service in SERVICES.items():
        for published in service.get("ports", []):
            assert published.startswith("127.0.0.1:"), f"{name} publishes {published} beyond loopback"
    for viewer in (SERVICES["viewer-1"], SERVICES["viewer-2"]):
        assert _option(viewer["command"], "--host") == "0.0.0.0"
        assert ":?" in viewer["environment"]["OTEL_SESSION_VIEWER_TOKEN"]  # compose refuses to start without one


def test_the_image_installs_every_package():
    """The Dockerfile installs non-editable: every package directory must be listed for setuptools."""
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dirs = setuptools["package-dir"]
    found = set()
    for package, directory in package_dirs.items():
        for init in (REPO / directory).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / directory)
            found.add(".".join([package, *relative.parts]))
    assert found <= set(setuptools["packages"])
