// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The public API of gradwire. No libfabric, NCCL, MPI or torch type appears
// in any public header.
#pragma once

#include "gradwire/communicator.h"
#include "gradwire/device_stream.h"
#include "gradwire/digest.h"
#include "gradwire/elastic.h"
#include "gradwire/error.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"
#include "gradwire/reducer.h"
#include "gradwire/sharded.h"
#include "gradwire/types.h"
#include "gradwire/version.h"
#include "gradwire/work.h"
