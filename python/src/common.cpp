// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "common.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string_view>

#include "gradwire/types.h"

namespace gradwire::python {

namespace {

constexpr ErrorCode kCodes[] = {ErrorCode::InvalidArgument, ErrorCode::Timeout,
                                ErrorCode::PeerLost,        ErrorCode::Mismatch,
                                ErrorCode::Transport,       ErrorCode::Internal,
                                ErrorCode::Aborted,         ErrorCode::Protocol,
                                ErrorCode::Unauthenticated};

// Owned references, alive for the whole process (module state must outlive
// any exception translation, which can happen during interpreter shutdown).
PyObject* g_base = nullptr;
PyObject* g_classes[std::size(kCodes)] = {};

PyObject* class_for(ErrorCode code) {
  for (size_t i = 0; i < std::size(kCodes); ++i) {
    if (kCodes[i] == code) return g_classes[i];
  }
  return g_base;
}

// The builtin a subclass also derives from, so `except TimeoutError` and
// `except ValueError` catch what they would catch in plain Python code.
PyObject* builtin_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return PyExc_ValueError;
    case ErrorCode::Timeout: return PyExc_TimeoutError;
    case ErrorCode::PeerLost: return PyExc_ConnectionError;
    case ErrorCode::Unauthenticated: return PyExc_PermissionError;
    default: return nullptr;
  }
}

void raise_python(const Error& e) {
  PyObject* cls = class_for(e.code());
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", e.what()));
  if (!exc) return;  // the constructor's own error is already set
  const std::string_view code = to_string(e.code());
  exc.attr("code") = py::str(code.data(), code.size());
  exc.attr("message") = py::str(e.message());
  PyErr_SetObject(cls, exc.ptr());
}

std::mutex g_unpinned_mu;
std::vector<PyObject*> g_unpinned;  // references to drop, with the GIL

}  // namespace

void register_errors(py::module_& m) {
  if (!g_base) {
    g_base = PyErr_NewExceptionWithDoc(
        "gradwire.Error",
        "A gradwire failure. `code` names the kind (e.g. 'Timeout'), `message` is the C++\n"
        "message without its 'gradwire <Code>: ' prefix; str() is the full message.",
        PyExc_RuntimeError, nullptr);
    if (!g_base) throw py::error_already_set();
    PyObject_SetAttrString(g_base, "code", Py_None);
    for (size_t i = 0; i < std::size(kCodes); ++i) {
      const std::string name = std::string(to_string(kCodes[i])) + "Error";
      const std::string qualified = "gradwire." + name;
      PyObject* builtin = builtin_for(kCodes[i]);
      py::object bases = builtin ? py::object(py::make_tuple(py::handle(g_base), py::handle(builtin)))
                                 : py::object(py::reinterpret_borrow<py::object>(g_base));
      g_classes[i] = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
      if (!g_classes[i]) throw py::error_already_set();
      const std::string_view code = to_string(kCodes[i]);
      py::handle(g_classes[i]).attr("code") = py::str(code.data(), code.size());
    }
    py::register_exception_translator([](std::exception_ptr p) {
      try {
        if (p) std::rethrow_exception(p);
      } catch (const Error& e) {
        raise_python(e);
      }
    });
  }
  m.attr("Error") = py::handle(g_base);
  for (size_t i = 0; i < std::size(kCodes); ++i) {
    m.attr((std::string(to_string(kCodes[i])) + "Error").c_str()) = py::handle(g_classes[i]);
  }
}

// Note [interruptible wait]: Python runs signal handlers only on the main
// thread and only when C code returns to the interpreter (or calls
// PyErr_CheckSignals). A wait that blocked in C++ until the collective's
// deadline would make Ctrl-C do nothing for minutes. So we wait in 50 ms
// slices with the GIL released and check for signals in between; a pending
// KeyboardInterrupt propagates while the collective keeps running (its
// buffers stay pinned, Note [pinned buffers]).
bool wait_interruptibly(const Work& work, double timeout_s) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSlice = std::chrono::milliseconds(50);
  const bool bounded = timeout_s >= 0;
  const auto deadline =
      clock::now() + std::chrono::duration_cast<clock::duration>(
                         std::chrono::duration<double>(bounded ? timeout_s : 0.0));
  for (;;) {
    if (work.test()) break;
    auto slice = kSlice;
    if (bounded) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      if (left.count() <= 0) return false;
      slice = std::min(slice, left);
    }
    {
      py::gil_scoped_release nogil;
      try {
        work.wait(slice);
      } catch (const Error& e) {
        // A Timeout from our slice is not an error; anything the Work itself
        // failed with is rethrown below by the final wait().
        if (e.code() != ErrorCode::Timeout || work.test()) break;
      }
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  {
    py::gil_scoped_release nogil;
    work.wait();  // finished: returns at once or rethrows its error
  }
  return true;
}

void pin(const Work& work, const std::vector<py::object>& objects) {
  // Raw pointers with one reference each: the callback may be destroyed on
  // the engine thread, where touching a py::object would need the GIL.
  auto refs = std::make_shared<std::vector<PyObject*>>();
  for (const auto& o : objects) {
    Py_INCREF(o.ptr());
    refs->push_back(o.ptr());
  }
  work.then([refs](std::exception_ptr) {
    std::lock_guard<std::mutex> lk(g_unpinned_mu);
    g_unpinned.insert(g_unpinned.end(), refs->begin(), refs->end());
    refs->clear();
  });
}

void release_unpinned() {
  std::vector<PyObject*> drop;
  {
    std::lock_guard<std::mutex> lk(g_unpinned_mu);
    drop.swap(g_unpinned);
  }
  for (PyObject* o : drop) Py_DECREF(o);
}

}  // namespace gradwire::python
