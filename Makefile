# The two commands a newcomer needs (see README.md):
#   make demo   installs what is missing, builds the `flashlab` program alone (not the tests,
#               not the CUDA kernels), lists the lessons, runs lesson 0 and the tour
#   make test   installs what is missing, builds everything, and runs every test through CTest
# Both go through CMake presets; the build lives in build/.
.PHONY: demo test build configure deps clean

JOBS ?= $(shell nproc)

FLASHLAB = ./build/lessons/app/flashlab

demo: configure
	cmake --build --preset default -j $(JOBS) --target flashlab
	$(FLASHLAB) lessons
	@echo
	$(FLASHLAB) lesson 0
	@echo
	$(FLASHLAB) tour

test: build
	ctest --preset default -j $(JOBS)

build: configure
	cmake --build --preset default -j $(JOBS)

configure: deps
	cmake --preset default

deps:
	./scripts/install-deps.sh

clean:
	rm -rf build build-*/
