# Thin wrapper over CMake + CTest. `make` builds build/millrace and libmillrace.
BUILD ?= build
JOBS ?= $(shell nproc)
NAME ?= noop

TORTURE_MAX ?= 10

.PHONY: all deps build test demo demo-images asan tsan torture fuzz bench clean python install-python

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

# The Python package: build/python/millrace (PYTHONPATH=build/python), part of the build.
python: build
	@test -f $(BUILD)/python/millrace/__init__.py || { echo "python: no python3-dev (make deps)"; exit 1; }

# Copies it where Debian's /usr/bin/python3 finds it (its site-packages under /usr/local).
install-python: python
	dest=$$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))') && \
	    mkdir -p "$$dest" && rm -rf "$$dest/millrace" && cp -r $(BUILD)/python/millrace "$$dest/" && \
	    echo "installed millrace into $$dest"

demo: deps
	$(MAKE) build
	./examples/churn/run-demo.sh $(CURDIR)/$(BUILD)/millrace

# The images example: Fashion-MNIST as 70,000 PNG files -> shards -> a CNN through the loader.
demo-images: deps
	$(MAKE) build
	./examples/images/run-demo.sh $(CURDIR)/$(BUILD)/millrace

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMILLRACE_SANITIZE=ON -DMILLRACE_TORTURE_MAX=3 >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) --timeout 600

# ThreadSanitizer over the tests that drive millrace's threads (ctest label
# tsan, listed in tests/CMakeLists.txt). The first report stops the process
# that made it (halt_on_error), which then exits 66: the test fails, and the
# e2e scripts also fail on a report in a server's or a stage's log.
TSAN_OPTIONS_MAKE = halt_on_error=1 second_deadlock_stack=1 exitcode=66

tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMILLRACE_TSAN=ON >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS="$(TSAN_OPTIONS_MAKE)" ctest -L tsan --output-on-failure -j $(JOBS)

# Allocation-failure torture of every unit test in the ASan build: each test
# case rerun with its Nth allocation failing, for TORTURE_MAX values of N
# spread over its allocations (TORTURE_MAX=0: every N; hours).
torture: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMILLRACE_SANITIZE=ON -DMILLRACE_TORTURE_MAX=$(TORTURE_MAX) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest -L torture --output-on-failure -j $(JOBS)

# libFuzzer targets (tests/fuzz/fuzz_*.c), clang with ASan + UBSan, in
# build-fuzz/; bench/fuzz/run.sh runs them. `make test` replays their corpora
# with any compiler and needs none of this.
fuzz:
	@./scripts/install-deps.sh --fuzz
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMILLRACE_FUZZ=ON -DMILLRACE_SANITIZE=ON >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz

bench:
	@./scripts/install-deps.sh --bench
	$(MAKE) build
	./bench/$(NAME)/run.sh $(CURDIR)/$(BUILD)/millrace

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
