// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "buffer.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "gradwire/error.h"

namespace gradwire::python {

namespace {

// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html), v0.8's
// unversioned structs, which every producer still exports by default. Declared
// here because Debian ships no dlpack header; the layout is frozen.
struct DLDevice {
  int32_t device_type;  // 1 = kDLCPU, 3 = kDLCUDAHost
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements; nullptr = compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::InvalidArgument, msg);
}

DataType from_dlpack(const DLDataType& t, const char* what) {
  if (t.lanes == 1) {
    if (t.code == 2 && t.bits == 32) return DataType::Float32;
    if (t.code == 2 && t.bits == 64) return DataType::Float64;
    if (t.code == 2 && t.bits == 16) return DataType::Float16;
    if (t.code == 4 && t.bits == 16) return DataType::BFloat16;
    if (t.code == 0 && t.bits == 32) return DataType::Int32;
    if (t.code == 0 && t.bits == 64) return DataType::Int64;
    if (t.code == 1 && t.bits == 8) return DataType::UInt8;
    if (t.code == 0 && t.bits == 8) return DataType::Int8;
    if (t.code == 0 && t.bits == 16) return DataType::Int16;
    if (t.code == 6 && t.bits == 8) return DataType::Bool;  // kDLBool
  }
  invalid(std::string(what) + ": DLPack dtype (code " + std::to_string(t.code) + ", " +
          std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
          " lanes) is not one gradwire reduces (float32/64, float16, bfloat16, int8/16/32/64, uint8, "
          "bool)");
}

// The buffer protocol's struct-module format: "f", "<f", "=e", "l", ...
DataType from_format(const std::string& format, size_t itemsize, const char* what) {
  std::string f = format;
  if (!f.empty() && std::strchr("@=<!", f[0])) f.erase(0, 1);
  if (f.size() == 1) {
    switch (f[0]) {
      case 'f': return DataType::Float32;
      case 'd': return DataType::Float64;
      case 'e': return DataType::Float16;
      case 'B': return DataType::UInt8;
      case 'b': return DataType::Int8;
      case 'h': return DataType::Int16;
      case '?': return DataType::Bool;
      case 'i': case 'l': case 'q':
        if (itemsize == 4) return DataType::Int32;
        if (itemsize == 8) return DataType::Int64;
        break;
      default: break;
    }
  }
  invalid(std::string(what) + ": buffer format '" + format + "' (item size " +
          std::to_string(itemsize) +
          ") is not one gradwire reduces (float32/64, float16, int8/16/32/64, uint8, bool; "
          "bfloat16 via DLPack)");
}

BufferView view_dlpack(const py::handle& obj, bool writable, const char* what) {
  py::object capsule = obj.attr("__dlpack__")();
  auto* managed =
      static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) throw py::error_already_set();
  // Consumed: rename so the producer's capsule destructor does not free it;
  // we call the deleter ourselves when the view's owner goes away.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  py::capsule owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != 1 && t.device.device_type != 3) {
    invalid(std::string(what) + ": DLPack device type " + std::to_string(t.device.device_type) +
            " is not host memory (the direct API reduces host buffers; GPU buffers will go "
            "through NCCL)");
  }
  BufferView v;
  v.dtype = from_dlpack(t.dtype, what);
  size_t count = 1;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.strides && t.shape[d] > 1 && t.strides[d] != expected) {
      invalid(std::string(what) + ": DLPack tensor is not contiguous (gradwire reads and writes "
                                  "it in place; pass a contiguous copy)");
    }
    expected *= t.shape[d];
    count *= size_t(t.shape[d]);
  }
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.count = count;
  v.owner = std::move(owner);
  (void)writable;  // DLPack (unversioned) carries no read-only flag
  return v;
}

}  // namespace

BufferView view_buffer(const py::handle& obj, bool writable, const char* what) {
  if (PyObject_CheckBuffer(obj.ptr())) {
    int flags = PyBUF_FORMAT | PyBUF_ND | PyBUF_C_CONTIGUOUS;
    if (writable) flags |= PyBUF_WRITABLE;
    // The export stays held (so numpy cannot resize the array) until the
    // capsule owning it is dropped.
    auto* b = new Py_buffer;
    if (PyObject_GetBuffer(obj.ptr(), b, flags) != 0) {
      delete b;
      PyErr_Clear();
      invalid(std::string(what) + ": " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
              (writable ? " is read-only or not C-contiguous" : " is not C-contiguous") +
              " (gradwire uses the memory in place, without a copy)");
    }
    py::capsule owner(b, [](void* p) {
      auto* held = static_cast<Py_buffer*>(p);
      PyBuffer_Release(held);
      delete held;
    });
    BufferView v;
    v.dtype = from_format(b->format ? b->format : "B", size_t(b->itemsize), what);
    v.data = b->buf;
    v.count = size_t(b->len / b->itemsize);
    v.owner = std::move(owner);
    return v;
  }
  if (py::hasattr(obj, "__dlpack__")) return view_dlpack(obj, writable, what);
  invalid(std::string(what) + ": " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
          " supports neither the buffer protocol nor DLPack");
}

}  // namespace gradwire::python
