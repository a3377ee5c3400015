# kit report html in a real headless browser (tests/browser): included by the Makefile.
#
#   make test-browser    Debian's chromium (installed when root and apt-get exist; Playwright
#                        comes with the dev extra), then tests/browser. KIT_SAVE_SCREENSHOT=1 also writes
#                        docs/img/report-html.png. Playwright's own browser download is not used.

.PHONY: test-browser

# wait for another apt-get instead of failing (.ci/run builds images beside this, with apt)
APT_WAIT := -o DPkg::Lock::Timeout=600

test-browser: venv ## kit report html pages in headless Chromium: no console error, no request
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { \
	  apt-get $(APT_WAIT) install -y -q --no-install-recommends chromium >/dev/null 2>&1 || { \
	  apt-get $(APT_WAIT) update -q >/dev/null && \
	  apt-get $(APT_WAIT) install -y -q --no-install-recommends chromium >/dev/null; }; }; } || true
	@command -v chromium >/dev/null || { echo "test-browser: no chromium: install Debian's chromium package" >&2; exit 1; }
	$(PY) -m pytest tests/browser -q $(PYTEST_ARGS)
