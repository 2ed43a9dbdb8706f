# spprof developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
PYENV_ROOT ?= $(HOME)/.pyenv
# Every CPython 3.9-3.13 pyenv has (newest patch of each minor); without pyenv, python3 and
# every python3.9 ... python3.15 on PATH (one per distinct interpreter).
PYENV_PYTHONS := $(shell for m in 3.9 3.10 3.11 3.12 3.13; do \
             ls -d $(PYENV_ROOT)/versions/$$m.* 2>/dev/null | grep -E "/$$m\.[0-9]+$$" | sort -V | tail -n 1; \
           done | sed 's|$$|/bin/python|')
PATH_PYTHONS = $(shell for p in python3 python3.9 python3.10 python3.11 python3.12 python3.13 python3.14 python3.15; do \
             command -v $$p >/dev/null && $$p -c 'import sys; sys.version_info >= (3, 9) and \
               print("%d.%d" % sys.version_info[:2], sys.executable)' 2>/dev/null; \
           done | awk '!seen[$$1]++ {print $$2}')
PYTHONS ?= $(if $(strip $(PYENV_PYTHONS)),$(PYENV_PYTHONS),$(PATH_PYTHONS))
# CPython 3.14 and 3.15 are not in pyenv here: Debian's packages (unstable), unpacked into a
# sysroot under build/ by `make pythons-debian` and run through the sysroot's own loader.
# DEBIAN_PYTHONS= leaves them out; the sysroot is amd64, so other machines leave them out too.
DEBIAN_PYTHONS ?= $(if $(filter x86_64,$(shell uname -m)),3.14 3.15)
DEBIAN_SYSROOT := build/sysroot/unstable-amd64
DEBIAN_MULTIARCH := x86_64-linux-gnu
DEBIAN_LOADER := ld-linux-x86-64.so.2
PYTHONS += $(foreach v,$(DEBIAN_PYTHONS),$(CURDIR)/$(DEBIAN_SYSROOT)/usr/bin/python$(v))
PYTHON ?= python3
VENVS := .venvs
# Pinned, so that a new release cannot turn CI red by itself. 3.9 gets the last releases that
# support it. greenlet and gevent: the torture suite's real-world stack switchers. ipython: the
# %spprof magics' tests (9.x needs 3.11+; 8.18 is the last for 3.9). numpy: OpenBLAS's own
# threads, which have no Python state (tests/test_native_threads.py, benchmarks); wheels only.
# uvicorn: a real server whose shutdown restores its SIGTERM handler and re-raises
# (tests/test_exit_paths.py; 3.10+). mypy: real mypyc-compiled code named as Python
# (tests/test_mypyc_names.py; the lint's pin; 3.10+). gunicorn: a real pre-fork server whose
# workers --subprocesses must profile (tests/test_subprocesses.py; 27.x needs 3.10+). django
# (with its asgiref and sqlparse): runserver's reloader re-runs the server in a child (5.2: 3.10+).
# uvloop, fastapi, aiohttp: real event loops and servers for --async's census (3.10+ but uvloop).
DEV_DEPS := "pytest==9.2.0; python_version>='3.10'" "pytest==8.4.2; python_version<'3.10'" \
            "pytest-benchmark==5.3.1; python_version>='3.10'" "pytest-benchmark==5.2.3; python_version<'3.10'" \
            "jsonschema==4.26.0; python_version>='3.10'" "jsonschema==4.25.1; python_version<'3.10'" \
            "greenlet==3.5.6; python_version>='3.10'" "greenlet==3.2.5; python_version<'3.10'" \
            "gevent==26.9.0; python_version>='3.10'" "gevent==25.9.1; python_version<'3.10'" \
            "setuptools==84.2.1; python_version>='3.10'" "setuptools==82.0.1; python_version<'3.10'" wheel==0.48.0 \
            "ipython==9.18.1; python_version>='3.11'" "ipython==8.39.0; python_version=='3.10'" \
            "ipython==8.18.1; python_version<'3.10'" \
            "numpy==2.5.5; python_version>='3.12'" "numpy==2.2.6; python_version=='3.10' or python_version=='3.11'" \
            "numpy==2.0.2; python_version<'3.10'" "uvicorn==0.54.0; python_version>='3.10'" \
            "mypy==1.20.2; python_version>='3.10'" "gunicorn==27.0.1; python_version>='3.10'" \
            "django==5.2.19; python_version>='3.10'" "asgiref==3.12.1; python_version=='3.10'" \
            "asgiref==3.13.0; python_version>='3.11'" \
            "sqlparse==0.6.1; python_version>='3.10'" uvloop==0.23.0 \
            "fastapi==0.165.0; python_version>='3.11'" "fastapi==0.162.5; python_version=='3.10'" \
            "aiohttp==3.14.5; python_version>='3.10'"
RUFF := ruff==0.17.6
MYPY := mypy==1.20.2
# A real third-party test suite under the profiler at 1 ms (issue "never harm the host"):
# more-itertools' own tests from its sdist, on CPython 3.12 (where torn frames showed up).
THIRDPARTY_PY ?= $(shell ls -d $(PYENV_ROOT)/versions/3.12.* 2>/dev/null | sort -V | tail -n 1)/bin/python
MORE_ITERTOOLS := more-itertools==11.2.1
# CPython's own test modules plain and under spprof (tests/tools/cpython_tests.py): pyenv's
# 3.12 and 3.13, which ship the `test` package, and Debian's 3.14 and 3.15 with
# libpython3.X-testsuite in the sysroot.
CPYTHON_TESTS_PYTHONS ?= $(foreach m,3.12 3.13,$(shell ls -d $(PYENV_ROOT)/versions/$(m).* 2>/dev/null | grep -E "/$(m)\.[0-9]+$$" | sort -V | tail -n 1)/bin/python) \
                         $(foreach v,$(DEBIAN_PYTHONS),$(CURDIR)/$(DEBIAN_SYSROOT)/usr/bin/python$(v))
NATIVE_SRCS := $(wildcard tests/native/*.cpp) $(wildcard src/spprof/_ext/suspend/*.cpp) $(wildcard src/spprof/_ext/unwind/*.cpp) \
               $(wildcard src/spprof/_ext/platform/*_linux.cpp) src/spprof/_ext/log.cpp \
               src/spprof/_ext/session/stack_builder.cpp src/spprof/_ext/session/overhead_budget.cpp \
               src/spprof/_ext/session/stack_store.cpp \
               src/spprof/_ext/capture/record_writer.cpp src/spprof/_ext/held_fd.cpp
NATIVE_FLAGS := -std=c++17 -O1 -g -Wall -Wextra -Werror -pthread -Isrc/spprof/_ext
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

.PHONY: sdist-check demo test print-pythons pythons-debian native-test native-test-asan test-python test-asan test-thirdparty test-cpython-modules test-arm64 test-arm64-quick lint bench bench-smoke darwin-check clean \
        wheels wheels-all wheels-check

# Install spprof for the default interpreter and profile the bundled example.
demo:
	@set -e; v=$(VENVS)/demo; \
	[ -x $$v/bin/python ] || $(PYTHON) -m venv $$v; \
	$$v/bin/python -c 'import setuptools, wheel, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null || \
	  $$v/bin/python -m pip install -q --upgrade "setuptools>=77" wheel >/dev/null; \
	$$v/bin/python -m pip install -q --no-build-isolation . ; \
	$$v/bin/python -m spprof -o demo.speedscope.json examples/threads_demo.py

# Native unit tests, then the Python suite on every interpreter, warnings as errors.
test: lint native-test test-python

native-test:
	@mkdir -p build
	g++ $(NATIVE_FLAGS) $(NATIVE_SRCS) -o build/native_tests
	./build/native_tests

native-test-asan:
	@mkdir -p build
	g++ $(NATIVE_FLAGS) $(SAN_FLAGS) $(NATIVE_SRCS) -o build/native_tests_asan
	./build/native_tests_asan

# Shell, in a recipe's loop over $$py with $$v its venv: makes the venv (Debian's interpreters
# have no ensurepip: pip from the sysroot's wheel) and sets $$flags (their headers' folder).
VENV_FOR_PY = case $$py in $(CURDIR)/$(DEBIAN_SYSROOT)/*) \
	    flags=-I$(CURDIR)/$(DEBIAN_SYSROOT)-include; \
	    [ -x $$v/bin/python ] || { $$py -m venv --without-pip $$v && \
	      whl=$$(ls $(DEBIAN_SYSROOT)/usr/share/python-wheels/pip-*.whl) && $$v/bin/python $$whl/pip install -q --no-index $$whl; } ;; \
	  *) [ -x $$v/bin/python ] || $$py -m venv $$v ;; \
	  esac

# A failing interpreter does not stop the others: one run shows every version's failures.
test-python:
	@set -e; [ -n "$(strip $(PYTHONS))" ] || { echo "no CPython 3.9-3.13 found under $(PYENV_ROOT)"; exit 1; }; \
	case "$(PYTHONS)" in *$(DEBIAN_SYSROOT)*) $(MAKE) --no-print-directory pythons-debian ;; esac; \
	failed=; for py in $(PYTHONS); do \
	  ver=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'); v=$(VENVS)/$$ver; \
	  echo "=== CPython $$ver ($$py)"; flags=; \
	  $(VENV_FOR_PY); \
	  $$v/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true; \
	  $$v/bin/python -m pip install -q $(DEV_DEPS); \
	  CPPFLAGS=$$flags SPPROF_BUILD_BASE=build/test-$$ver SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps . ; \
	  (cd tests && CPPFLAGS=$$flags $(CURDIR)/$$v/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) .) || \
	    failed="$$failed $$ver"; \
	done; \
	[ -z "$$failed" ] || { echo "test-python: the suite failed on$$failed"; exit 1; }

# Debian's CPython 3.14 and 3.15 (python3.X, libpython3.X-dev for the headers, python3.X-venv
# for ensurepip and pip's wheel) and every library they need, unpacked into $(DEBIAN_SYSROOT)
# (tests/tools/debian_sysroot.py: a private apt configuration; nothing is installed into the
# system). Each interpreter is then given the sysroot's loader and library path (patchelf), so
# that it, its venvs and its subprocesses run on the sysroot's libc. Debian's pyconfig.h
# includes <x86_64-linux-gnu/python3.X/pyconfig.h>: $(DEBIAN_SYSROOT)-include holds just that,
# for -I (the sysroot's own /usr/include would bring its libc headers). Needs apt-get,
# dpkg-deb, patchelf and the network on the first run; a no-op once done.
# Debian compiles a package's modules when it is installed (py3compile); unpacked here, the
# stdlib has no .pyc, and with PYTHONDONTWRITEBYTECODE set (CI's environment) every interpreter
# start compiled typing, dataclasses, inspect... again: `import spprof` took 0.51 s on 3.14
# against 0.19 s on 3.13, and the suite ran ~25 % longer on 3.14 and 3.15.
pythons-debian:
	@set -e; [ -n "$(strip $(DEBIAN_PYTHONS))" ] || exit 0; \
	command -v patchelf >/dev/null || { echo "pythons-debian: needs patchelf (apt-get install patchelf)"; exit 1; }; \
	$(PYTHON) tests/tools/debian_sysroot.py --suite unstable --arch amd64 --dest $(DEBIAN_SYSROOT) libstdc++6 \
	  $(foreach v,$(DEBIAN_PYTHONS),python$(v) libpython$(v)-dev python$(v)-venv libpython$(v)-testsuite); \
	root=$(CURDIR)/$(DEBIAN_SYSROOT); lib=$$root/usr/lib/$(DEBIAN_MULTIARCH); \
	for v in $(DEBIAN_PYTHONS); do \
	  py=$$root/usr/bin/python$$v; \
	  [ "$$(patchelf --print-interpreter $$py):$$(patchelf --print-rpath $$py)" = "$$lib/$(DEBIAN_LOADER):$$lib" ] || \
	    patchelf --set-interpreter $$lib/$(DEBIAN_LOADER) --force-rpath --set-rpath $$lib $$py; \
	  mkdir -p $$root-include/$(DEBIAN_MULTIARCH); \
	  ln -sfn $$root/usr/include/$(DEBIAN_MULTIARCH)/python$$v $$root-include/$(DEBIAN_MULTIARCH)/python$$v; \
	  $$py -m compileall -q -j 2 -x '/test/' $$root/usr/lib/python$$v >/dev/null || true; \
	  $$py -c 'import sys; print("pythons-debian:", sys.executable, sys.version.split()[0])'; \
	done

# AddressSanitizer + UBSan build of the extension; the interpreter preloads the runtime.
test-asan: native-test-asan
	@set -e; v=$(VENVS)/asan; [ -x $$v/bin/python ] || $(PYTHON) -m venv $$v; \
	$$v/bin/python -m pip install -q $(DEV_DEPS); \
	SPPROF_BUILD_BASE=build/asan SPPROF_SANITIZE=1 SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps . ; \
	asan=$$(g++ -print-file-name=libasan.so); ubsan=$$(g++ -print-file-name=libubsan.so); \
	cd tests && LD_PRELOAD="$$asan $$ubsan" ASAN_OPTIONS=detect_leaks=0:handle_segv=1:allow_user_segv_handler=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SPPROF_TEST_ASAN=1 \
	  ../$$v/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) .

# more-itertools' suite must pass under `python -m spprof -i 1 -m pytest` with its exit code
# passed through, and the profile must name its functions.
test-thirdparty:
	@set -e; v=$(VENVS)/thirdparty; d=build/thirdparty; mkdir -p $$d; \
	[ -x $$v/bin/python ] || $(THIRDPARTY_PY) -m venv $$v; \
	$$v/bin/python -m pip install -q $(DEV_DEPS); \
	SPPROF_BUILD_BASE=build/thirdparty-build SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps . ; \
	[ -d $$d/src ] || { $$v/bin/python -m pip download -q --no-deps --no-binary :all: $(MORE_ITERTOOLS) -d $$d \
	  && mkdir -p $$d/src && tar xzf $$d/more_itertools-*.tar.gz -C $$d/src --strip-components=1; }; \
	rm -f $$d/profile.spprof; \
	(cd $$d/src && ../../../$$v/bin/python -m spprof -q -i 1 -f spprof -o ../profile.spprof \
	  -m pytest -q -p no:cacheprovider tests); \
	$$v/bin/python -c "import spprof, sys; p = spprof.load('$$d/profile.spprof'); \
	  n = sum(any('more_itertools/' in f.filename for f in s.frames) for s in p.samples); \
	  print('third-party profile:', len(p.samples), 'samples,', n, 'in more_itertools'); \
	  sys.exit(0 if n > 100 else 'too few more_itertools samples in the profile')"

# CPython's test_threading, test_signal, test_os, test_faulthandler and test_subprocess, plain
# and under `python -m spprof -i 1` in cpu and wall mode: every test must end as in the plain
# run, except the known differences listed in the tool. Uses test-python's venvs and build
# folders (made here when missing).
test-cpython-modules:
	@set -e; case "$(CPYTHON_TESTS_PYTHONS)" in *$(DEBIAN_SYSROOT)*) $(MAKE) --no-print-directory pythons-debian ;; esac; \
	venvs=; for py in $(CPYTHON_TESTS_PYTHONS); do \
	  ver=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'); v=$(VENVS)/$$ver; flags=; \
	  $(VENV_FOR_PY); \
	  $$v/bin/python -m pip install -q $(DEV_DEPS); \
	  CPPFLAGS=$$flags SPPROF_BUILD_BASE=build/test-$$ver SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps . ; \
	  venvs="$$venvs --python $(CURDIR)/$$v/bin/python"; \
	done; \
	$(PYTHON) tests/tools/cpython_tests.py $$venvs $(CPYTHON_TESTS_ARGS)

# Linux arm64, checked by running (docs/portability.md): Debian bookworm's arm64 CPython 3.11
# under qemu-user, from a sysroot of Debian packages (tests/tools/debian_sysroot.py). The venv's
# bin/python is a shell script that runs the interpreter under qemu with itself as argv[0], so
# sys.executable, and every subprocess a test starts with it, goes through qemu too (no
# binfmt_misc needed). Test deps are arm64 wheels fetched by the host's pip; greenlet and gevent
# are the newest releases with arm64 wheels. spprof is built by pip run under qemu, which
# invokes the host's aarch64 cross compiler with Debian's arm64 sysconfig (-Werror).
# Debian ships the standard library without .pyc (its postinst compiles them): the host's 3.11
# compiles them once (one .pyc format for every 3.11 release), else each interpreter start
# under qemu compiles every module it imports.
ARM64_SYSROOT := build/sysroot/bookworm-arm64
ARM64_VENV := build/arm64/venv
ARM64_QEMU ?= qemu-aarch64-static
ARM64_HOST_PY ?= $(shell ls -d $(PYENV_ROOT)/versions/3.11.* 2>/dev/null | sort -V | tail -n 1)/bin/python
ARM64_DEPS := pytest==9.2.0 jsonschema==4.26.0 greenlet==3.2.5 gevent==25.9.1 setuptools==84.2.1 \
              wheel==0.48.0 pip==26.3
ARM64_WHEEL_TAGS := --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 \
                    --python-version 3.11 --implementation cp --abi cp311 --only-binary=:all:

define arm64_env
set -e; root=$$(pwd); sys=$$root/$(ARM64_SYSROOT); v=$$root/$(ARM64_VENV); \
command -v $(ARM64_QEMU) >/dev/null && command -v aarch64-linux-gnu-g++ >/dev/null || { \
  echo "test-arm64 needs the Debian packages qemu-user-static and g++-aarch64-linux-gnu"; exit 1; }; \
$(PYTHON) tests/tools/debian_sysroot.py --suite bookworm --arch arm64 --dest $(ARM64_SYSROOT) \
  python3.11 libpython3.11-dev libstdc++6; \
site=$$v/lib/python3.11/site-packages; mkdir -p $$v/bin $$site; \
$(ARM64_HOST_PY) -m compileall -q -j 2 $$sys/usr/lib/python3.11 >/dev/null || true; \
printf 'home = %s/usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n' "$$sys" > $$v/pyvenv.cfg; \
printf '#!/bin/sh\nexec %s -L %s -0 "$$0" %s/usr/bin/python3.11 "$$@"\n' \
  "$$(command -v $(ARM64_QEMU))" "$$sys" "$$sys" > $$v/bin/python; chmod +x $$v/bin/python; \
[ "$$(cat $$v/.deps 2>/dev/null)" = "$(ARM64_DEPS)" ] || { rm -rf $$site; \
  $(ARM64_HOST_PY) -m pip install -q --target $$site $(ARM64_WHEEL_TAGS) $(ARM64_DEPS) \
  && echo "$(ARM64_DEPS)" > $$v/.deps; }; \
export CPPFLAGS="-I$$sys/usr/include/python3.11 -idirafter $$sys/usr/include" CC=aarch64-linux-gnu-gcc \
  CXX=aarch64-linux-gnu-g++ LDSHARED="aarch64-linux-gnu-g++ -shared" SPPROF_TEST_EMULATED=1; \
SPPROF_BUILD_BASE=build/arm64/ext SPPROF_WERROR=1 \
  $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps . ; \
aarch64-linux-gnu-g++ $(NATIVE_FLAGS) $(NATIVE_SRCS) -o build/arm64/native_tests; \
SPPROF_TEST_LIBPYTHON=$$sys/usr/lib/aarch64-linux-gnu/libpython3.11.so.1.0 SPPROF_TEST_LIBPYTHON_STRIPPED=1 \
  $(ARM64_QEMU) -L $$sys build/arm64/native_tests
endef

# Cross-built native tests, then the whole suite under qemu. CC and CPPFLAGS (the cross
# compiler, the arm64 headers) stay exported for the tests that build a C extension or shim;
# SPPROF_TEST_EMULATED=1 skips the tests marked with conftest.skip_when_emulated, each with its
# reason.
test-arm64:
	@$(arm64_env); cd tests && ../$(ARM64_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) .

# What CI runs: the same build and native tests, then the tests that exercise what differs on
# arm64 (native unwinding, frame walking, signals, wall mode, the torture cases).
ARM64_QUICK_TESTS := test_native.py test_torture.py test_wall.py test_threads.py test_sampling.py test_reliability_signals.py
test-arm64-quick:
	@$(arm64_env); cd tests && ../$(ARM64_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) $(ARM64_QUICK_TESTS)

# manylinux2014 wheels (docs/portability.md, "Wheels"), built by tools/wheels.py with zig for
# glibc 2.17, no container: `make wheels` builds CPython 3.9 and 3.12 x86_64 and the arm64
# sysroot's 3.11 into dist/ (symbols kept in build/wheels/debug/), runs `auditwheel show` on
# each, then installs each one and records a profile with it: on those interpreters, on Debian
# bullseye's CPython 3.9 on its own glibc 2.31, and the arm64 wheel under qemu-user.
# `make wheels-all` does the same for every interpreter `make test` uses (3.9-3.15) and for
# Debian's arm64 CPython 3.9, 3.11, 3.13, 3.14 and 3.15 (WHEEL_ARM64_MORE).
# `make wheels-check` reruns the second half on what dist/ holds (every wheel there must find an
# interpreter: after wheels-all, give WHEEL_PYTHONS="$$(make -s print-pythons)").
WHEEL_TOOLS := ziglang==0.17.0 auditwheel==6.8.2 pyelftools==0.33 setuptools==84.2.1
WHEEL_TOOLS_VENV := build/wheel-tools
WHEEL_TOOLS_PY ?= $(or $(wildcard $(PYENV_ROOT)/versions/3.12.*/bin/python),$(PYTHON))
WHEEL_PYTHONS ?= $(foreach m,3.9 3.12,$(firstword $(filter $(PYENV_ROOT)/versions/$(m).%,$(PYENV_PYTHONS))))
WHEELS_DIR := dist
BULLSEYE_SYSROOT := build/sysroot/bullseye-amd64
WHEEL_CROSS := aarch64:$(ARM64_SYSROOT):3.11
# wheels-all's other aarch64 CPythons: Debian's arm64 packages, SUITE:VERSION[,VERSION] (Debian
# has no arm64 3.10 or 3.12), with the suite's pip wheel (the host's pip 23.2 fails on 3.15;
# bullseye has none, and its 3.9 needs Debian's separate distutils for the host's pip). Each
# sysroot's stdlib is compiled once under qemu, as pythons-debian does on the host (one process:
# compileall -j 2 under qemu failed for 3.15): unpacked, it has no .pyc, and every start
# compiled it again.
WHEEL_ARM64_MORE := bullseye:3.9 trixie:3.13 unstable:3.14,3.15
comma := ,
WHEEL_CROSS_MORE := $(foreach s,$(WHEEL_ARM64_MORE),$(foreach v,$(subst $(comma), ,$(lastword $(subst :, ,$(s)))),aarch64:build/sysroot/$(firstword $(subst :, ,$(s)))-arm64:$(v)))

define wheel_setup
set -e; t=$(WHEEL_TOOLS_VENV)/bin/python; \
[ "$$(cat $(WHEEL_TOOLS_VENV)/.tools 2>/dev/null)" = "$(WHEEL_TOOLS)" ] || { rm -rf $(WHEEL_TOOLS_VENV); \
  $(firstword $(WHEEL_TOOLS_PY)) -m venv $(WHEEL_TOOLS_VENV) && $$t -m pip install -q $(WHEEL_TOOLS) \
  && echo "$(WHEEL_TOOLS)" > $(WHEEL_TOOLS_VENV)/.tools; }; \
case "$(WHEEL_PYTHONS)" in *$(DEBIAN_SYSROOT)*) $(MAKE) --no-print-directory pythons-debian ;; esac; \
$(PYTHON) tests/tools/debian_sysroot.py --suite bookworm --arch arm64 --dest $(ARM64_SYSROOT) \
  python3.11 libpython3.11-dev libstdc++6; \
$(ARM64_HOST_PY) -m compileall -q -j 2 $(ARM64_SYSROOT)/usr/lib/python3.11 >/dev/null || true; \
$(PYTHON) tests/tools/debian_sysroot.py --suite bullseye --arch amd64 --dest $(BULLSEYE_SYSROOT) \
  python3.9 python3.9-venv; \
for sv in $(WHEEL_ARM64_SYSROOTS); do \
  suite=$${sv%%:*}; vers=$$(echo "$${sv#*:}" | tr , ' '); root=build/sysroot/$$suite-arm64; \
  pk=; for x in $$vers; do pk="$$pk python$$x libpython$$x-dev"; done; \
  case $$suite in bullseye) pk="$$pk python3-distutils" ;; *) pk="$$pk python3-pip-whl" ;; esac; \
  $(PYTHON) tests/tools/debian_sysroot.py --suite $$suite --arch arm64 --dest $$root $$pk libstdc++6; \
  for x in $$vers; do $(ARM64_QEMU) -L $$root $$root/usr/bin/python$$x -m compileall -q -x /test/ \
    $$root/usr/lib/python$$x >/dev/null || true; done; \
done
endef
WHEEL_CHECK = $$t tools/wheels.py check $(foreach p,$(WHEEL_PYTHONS),--python $(p)) \
  --bullseye $(BULLSEYE_SYSROOT) $(foreach c,$(WHEEL_CROSS),--cross $(c)) --wheels $(WHEELS_DIR)

wheels:
	@$(wheel_setup); rm -rf $(WHEELS_DIR); \
	$$t tools/wheels.py build $(foreach p,$(WHEEL_PYTHONS),--python $(p)) $(foreach c,$(WHEEL_CROSS),--cross $(c)) --out $(WHEELS_DIR); \
	$(WHEEL_CHECK)

wheels-all:
	@$(MAKE) --no-print-directory wheels WHEEL_PYTHONS="$(PYTHONS)" \
	  WHEEL_CROSS="$(WHEEL_CROSS) $(WHEEL_CROSS_MORE)" WHEEL_ARM64_SYSROOTS="$(WHEEL_ARM64_MORE)"

wheels-check:
	@$(wheel_setup); $(WHEEL_CHECK)

# The sdist as a pip user gets it: built from the tracked files, installed with pip into a
# fresh venv (the Makefile's pinned setuptools and wheel, no build isolation), and the suite's
# fast subset run from the unpacked sdist against that install (docs/portability.md).
SDIST_TESTS := test_api.py test_cli.py test_sampling.py test_output.py test_children.py
sdist-check:
	@set -e; d=$(CURDIR)/build/sdist-check; v=$(CURDIR)/$(VENVS)/sdist; rm -rf $$d; mkdir -p $$d/tree $$d/dist $$d/unpacked; \
	[ -x $$v/bin/python ] || $(PYTHON) -m venv $$v; \
	$$v/bin/python -m pip install -q $(DEV_DEPS); \
	git ls-files -z | xargs -0 tar -cf - | tar -xf - -C $$d/tree; \
	(cd $$d/tree && $$v/bin/python -c 'import sys, setuptools.build_meta as b; print("sdist:", b.build_sdist(sys.argv[1]))' $$d/dist); \
	tar -xzf $$d/dist/spprof-*.tar.gz -C $$d/unpacked; \
	SPPROF_BUILD_BASE=$$d/build SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --no-deps --force-reinstall $$d/dist/spprof-*.tar.gz; \
	(cd /tmp && $$v/bin/python -c 'import spprof, sys; sys.exit(0 if "/site-packages/" in spprof.__file__ else "spprof is not the installed one")'); \
	cd $$d/unpacked/spprof-*/tests && $$v/bin/python -m pytest -q -p no:cacheprovider $(SDIST_TESTS)

# ruff, then mypy --strict on src/spprof (its settings: pyproject.toml [tool.mypy]).
lint:
	@v=$(VENVS)/lint; [ -x $$v/bin/ruff ] && [ -x $$v/bin/mypy ] || { [ -x $$v/bin/python ] || $(PYTHON) -m venv $$v; \
	  $$v/bin/python -m pip install -q $(RUFF) $(MYPY); }; \
	$$v/bin/ruff check src tests benchmarks examples tools && $$v/bin/ruff format --check src tests benchmarks examples tools && \
	$$v/bin/mypy

darwin-check:
	../shared/tools/darwin-check

# The interpreters `make test` runs the suite on, one a line (.ci/run splits them in two lanes).
print-pythons:
	@for py in $(PYTHONS); do echo $$py; done

clean:
	rm -rf build dist $(VENVS) src/spprof/*.so demo.speedscope.json

# Benchmarks (docs/performance.md). One venv; the other profilers are optional: a column whose
# tool is missing (or, for py-spy and Austin, cannot ptrace here) is skipped and says why.
# austin-dist 3.7.0: 4.0.0's binary needs glibc 2.38 (Debian 12 has 2.36). The exact counts need
# valgrind (Debian package; skipped and said so without it), the kernel figures a C compiler.
BENCH_DEPS := $(DEV_DEPS)
BENCH_TOOLS := pyinstrument==5.1.3 yappi==1.7.6 py-spy==0.4.3 austin-dist==3.7.0 scalene==2.4.0
define bench_venv
v=$(VENVS)/bench; [ -x $$v/bin/python ] || $(PYTHON) -m venv $$v; \
$$v/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true; \
$$v/bin/python -m pip install -q $(BENCH_DEPS); \
$$v/bin/python -m pip install -q $(BENCH_TOOLS) || echo "bench: optional profilers not installed"; \
SPPROF_WERROR=1 $$v/bin/python -m pip install -q --no-build-isolation --force-reinstall --no-deps .
endef

# Full run: pytest-benchmark timings, then the overhead table, micro-figures, callgrind counts,
# kernel signal costs and the interleaved A/B (about 90 min on an idle 2-core machine).
bench:
	@set -e; $(bench_venv); \
	SPPROF_BENCH_SIZE=quick $$v/bin/python -m pytest -q -p no:cacheprovider benchmarks --benchmark-only $(PYTEST_ARGS); \
	mkdir -p benchmarks/results; \
	SPPROF_BENCH_COMMIT=$$(git rev-parse --short HEAD 2>/dev/null) $$v/bin/python -m benchmarks.run $(BENCH_ARGS) \
	  --output benchmarks/results/latest.md --json benchmarks/results/latest.json; \
	cat benchmarks/results/latest.md

# CI: every benchmark once at tiny sizes, no thresholds, so they never rot (about 2 minutes).
bench-smoke:
	@set -e; $(bench_venv); \
	SPPROF_BENCH_SIZE=smoke $$v/bin/python -m pytest -q -p no:cacheprovider benchmarks --benchmark-disable $(PYTEST_ARGS); \
	$$v/bin/python -m benchmarks.run --smoke
