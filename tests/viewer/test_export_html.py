"""A run as one HTML file (``otel-session export-html``, the viewer's "Download as HTML"): it opens
from ``file://`` in Debian's Chromium with every network request refused, replays, and shows facts."""

from __future__ import annotations

import io
import tarfile

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.viewer.export import ExportError, inline_modules

pytest.importorskip("playwright.sync_api")


def _open_offline(browser, path):
    """The file in a page whose every http(s) request is refused (and counted)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    requests: list[str] = []

    def refuse(route):
        requests.append(route.request.url)
        route.abort()

    context.route("http://**/*", refuse)
    context.route("https://**/*", refuse)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    return context, page, requests, errors


@pytest.mark.browser
def test_the_exported_run_replays_from_file_with_no_network(browser, sample, tmp_path, ui):
    target = tmp_path / "run.html"
    result = CliRunner().invoke(main, ["export-html", sample.session_id, sample.latest_run[:12], "-o", str(target),
                                       "--dir", str(sample.root)])
    assert result.exit_code == 0, result.output
    html = target.read_text()
    assert "src=\"/static" not in html and "href=\"/static" not in html  # nothing to fetch
    context, page, requests, errors = _open_offline(browser, target)
    try:
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator("#run-id").inner_text().startswith(sample.latest_run)
        assert page.locator("#integrity .badge").first.inner_text() == "complete"
        last = ui.cursor(page)
        assert last > 10
        assert "Friday" in page.locator("#conversation").inner_text()
        ui.seek_to(page, 3)
        assert "Friday" not in page.locator("#conversation").inner_text()  # replays: the past only
        assert page.locator("#exported-facts tbody tr").count() == 3
        assert "sometime soon" in page.locator("#exported-facts").inner_text()
        page.click("#spans-section > summary")  # the span tree reads the bundle in hand
        page.wait_for_selector("#spans details.kind-run")
        assert page.locator("#spans details.kind-turn").count() == 3
        assert page.inner_text("#spans .spans-status").endswith(f"records 1–{last} of {last}")
        assert requests == [] and errors == []
    finally:
        context.close()


@pytest.mark.browser
def test_a_file_that_is_not_a_bundle_says_so_in_one_line(browser, serve, sample, tmp_path):
    not_tar = tmp_path / "notes.txt"
    not_tar.write_text("hello\n" * 200)  # longer than a tar header, and none
    other_tar = tmp_path / "photos.tar"
    with tarfile.open(other_tar, "w", format=tarfile.USTAR_FORMAT) as archive:
        info = tarfile.TarInfo("photo.jpg")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"jpg"))
    server = serve(sample.root)
    context = browser.new_context()
    try:
        page = context.new_page()
        for file, reason in ((not_tar, "no ustar header"), (other_tar, "holds no run.json")):
            page.goto(f"{server.url}/open")
            page.set_input_files("#bundle-file", str(file))
            error = page.locator("#error")
            error.wait_for(state="visible")
            assert f"{file.name} is not an otel-session bundle" in error.inner_text() and reason in error.inner_text()
            assert "\n" not in error.inner_text().strip()
            assert page.locator("body").get_attribute("data-empty") == "true"  # no empty player
    finally:
        context.close()


def test_the_viewer_offers_the_same_download(client, sample):
    response = client.get(f"/sessions/{sample.session_id}/runs/{sample.latest_run}/export.html")
    assert response.status_code == 200
    assert response.headers["Content-Disposition"] == f'attachment; filename="{sample.latest_run}.html"'
    assert b'id="embedded-bundle"' in response.data and b"<script type=\"module\">" in response.data


def test_the_module_joiner_refuses_what_it_does_not_read(tmp_path):
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport function a() { return b(); }\n')
    (tmp_path / "b.js").write_text('import { a } from "./a.js";\nexport const b = () => 1;\n')
    with pytest.raises(ExportError, match="import circle"):
        inline_modules(tmp_path, "a.js")
    (tmp_path / "c.js").write_text('export default 3;\n')
    with pytest.raises(ExportError, match="does not read"):
        inline_modules(tmp_path, "c.js")
