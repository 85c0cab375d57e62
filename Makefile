# The two commands a newcomer needs (see README.md):
#   make demo   installs what is missing, builds, lists the lessons, runs lesson 0 and the tour
#   make test   installs what is missing, builds, and runs every test through CTest
# Both go through CMake presets; the build lives in build/.
.PHONY: demo test build deps clean

JOBS ?= $(shell nproc)

FLASHLAB = ./build/lessons/app/flashlab

demo: build
	$(FLASHLAB) lessons
	@echo
	$(FLASHLAB) lesson 0
	@echo
	$(FLASHLAB) tour

test: build
	ctest --preset default -j $(JOBS)

build: deps
	cmake --preset default
	cmake --build --preset default -j $(JOBS)

deps:
	./scripts/install-deps.sh

clean:
	rm -rf build build-*/
