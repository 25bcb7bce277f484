// The simulated driver's export list against the toolkit's cuda.h: every function it declares is exported under its
// real versioned name, nothing else is, unsimulated ones answer CUDA_ERROR_NOT_SUPPORTED with one line, and
// cuGetProcAddress reaches them with cudaTypedefs.h's versions.
#include <dlfcn.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "argument_sweep.h"
#include "simcuda_fixture.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string driver_path() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&cuInit), &info);
  return info.dli_fname;
}

std::set<std::string> simulator_list() {
  std::set<std::string> names;
  for (size_t i = 0; i < simcuda_cuda_h_function_count(); ++i) names.insert(simcuda_cuda_h_function(i));
  return names;
}

// cuda.h read here without the generator: `CUresult CUDAAPI NAME(` declarations, and `#define NAME TARGET`
// renames (TARGET may be wrapped in __CUDA_API_PTDS/PTSZ, which appends _ptds/_ptsz in per-thread mode).
struct Header {
  std::set<std::string> declared;
  std::map<std::string, std::string> renamed;      // default mode
  std::map<std::string, std::string> per_thread;   // CUDA_API_PER_THREAD_DEFAULT_STREAM
};

Header read_cuda_h() {
  Header h;
  const std::string text = read_file(CUDA_H);
  static const std::regex decl(R"(CUresult\s+CUDAAPI\s+(cu\w+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    h.declared.insert((*it)[1]);
  static const std::regex def(R"(#define\s+(cu\w+)\s+(__CUDA_API_PT(DS|SZ)\()?(cu\w+)\)?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), def); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1], target = (*it)[4];
    if (!h.renamed.count(name)) h.renamed[name] = target;
    if ((*it)[2].matched) h.per_thread[name] = target + ((*it)[3] == "DS" ? "_ptds" : "_ptsz");
  }
  return h;
}

}  // namespace

TEST(ExportList, EveryFunctionCudaHDeclaresIsExportedUnderItsRealName) {
  const Header h = read_cuda_h();
  ASSERT_GT(h.declared.size(), 400u) << "cuda.h not read: " << CUDA_H;
  const std::set<std::string> exports = kvremap::testing::exported_functions(driver_path(), "cu");
  for (const std::string& name : h.declared) {
    auto r = h.renamed.find(name);
    const std::string real = r == h.renamed.end() ? name : r->second;
    EXPECT_TRUE(exports.count(real)) << name << " -> " << real << " is not exported";
    auto p = h.per_thread.find(name);
    if (p != h.per_thread.end()) {
      EXPECT_TRUE(exports.count(p->second)) << p->second << " is not exported";
    }
  }
}

TEST(ExportList, NothingIsExportedThatCudaHDoesNotDeclare) {
  const std::set<std::string> exports = kvremap::testing::exported_functions(driver_path(), "cu");
  const std::set<std::string> listed = simulator_list();
  // The generator's list is cuda.h in all its modes, the older ABIs of its internal section included.
  const std::string text = read_file(CUDA_H);
  for (const std::string& name : exports) {
    EXPECT_TRUE(listed.count(name)) << name << " is exported but not in cuda.h";
    const std::string base = std::regex_replace(name, std::regex("_pt(ds|sz)$"), "");
    EXPECT_NE(text.find(base), std::string::npos) << name << " does not appear in cuda.h";
  }
  for (const std::string& name : listed) EXPECT_TRUE(exports.count(name)) << name << " is listed but not exported";
  EXPECT_EQ(exports.size(), listed.size());
}

TEST(ExportList, UnsimulatedFunctionsReturnNotSupportedAndSayWhichOnce) {
  int stubs = 0;
  for (const std::string& name : simulator_list()) {
    if (simcuda_is_simulated(name.c_str()) != 0) continue;
    ++stubs;
    // A stub ignores its arguments, so it can be called without any.
    auto* fn = reinterpret_cast<CUresult (*)()>(dlsym(RTLD_DEFAULT, name.c_str()));
    ASSERT_NE(fn, nullptr) << name;
    ::testing::internal::CaptureStderr();
    const CUresult first = fn();
    const CUresult second = fn();
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(first, CUDA_ERROR_NOT_SUPPORTED) << name;
    EXPECT_EQ(second, CUDA_ERROR_NOT_SUPPORTED) << name;
    EXPECT_EQ(err, "simcuda: " + name + " is not simulated (CUDA_ERROR_NOT_SUPPORTED)\n") << name;
  }
  EXPECT_GT(stubs, 100);
  EXPECT_EQ(simcuda_is_simulated("cuMemAlloc_v2"), 1);
  EXPECT_EQ(simcuda_is_simulated("cuEventRecord"), 1);
  EXPECT_EQ(simcuda_is_simulated("cuArrayCreate_v2"), 0);
  EXPECT_EQ(simcuda_is_simulated("cuNotAFunction"), -1);
}

class ProcAddress : public SimDriver {
 protected:
  void* Resolve(const char* symbol, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
    void* p = nullptr;
    EXPECT_CU(cuGetProcAddress_v2(symbol, &p, version, flags, status));
    return p;
  }
};

TEST_F(ProcAddress, EveryExportIsReachableByItsBaseName) {
  // A function is reachable when some (base name, version, flags) query returns its address.
  std::set<void*> reached;
  for (const std::string& name : simulator_list()) {
    const std::string base = std::regex_replace(name, std::regex("(_v[0-9]+)?(_pt(ds|sz))?$"), "");
    for (int version : {2000, 2010, 2020, 3000, 3020, 4000, 4010, 6000, 7000, 10000, 10010, 10020, 11000, 11020,
                        11030, 11040, 11060, 11070, 12000, 12010, 12020, 12030, 12050, 12080, 12090, 13000})
      for (cuuint64_t flags : {CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM})
        if (void* p = Resolve(base.c_str(), version, flags, nullptr)) {
          reached.insert(p);
        }
  }
  size_t unreachable = 0;
  std::string names;
  for (const std::string& name : simulator_list()) {
    if (!reached.count(dlsym(RTLD_DEFAULT, name.c_str()))) {
      ++unreachable;
      names += " " + name;
    }
  }
  // What remains are older ABIs: the per-thread variants of superseded versions, and versions older than
  // the hand-written table's entries (cuMemAlloc of CUDA 2.0, ...); their successors are reachable.
  EXPECT_LT(unreachable, 40u) << names;
  for (const char* name : {"cuEventRecord", "cuEventRecord_ptsz", "cuCtxCreate_v4", "cuMemsetD32_v2_ptds",
                           "cuIpcOpenMemHandle_v2", "cuDeviceGetUuid_v2", "cuStreamWaitEvent_ptsz"})
    EXPECT_TRUE(reached.count(dlsym(RTLD_DEFAULT, name))) << name << " is unreachable:" << names;
}

TEST_F(ProcAddress, GeneratedEntriesFollowTheVersionRules) {
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(Resolve("cuEventRecord", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            dlsym(RTLD_DEFAULT, "cuEventRecord_ptsz"));
  EXPECT_EQ(Resolve("cuEventRecord", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status),
            dlsym(RTLD_DEFAULT, "cuEventRecord"));
  EXPECT_EQ(Resolve("cuCtxCreate", 13000, 0, &status), dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"));
  EXPECT_EQ(Resolve("cuCtxCreate", 11040, 0, &status), dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"));
  EXPECT_EQ(Resolve("cuCtxCreate", 3020, 0, &status), dlsym(RTLD_DEFAULT, "cuCtxCreate_v2"));
  EXPECT_EQ(Resolve("cuDeviceGetUuid", 11040, 0, &status), dlsym(RTLD_DEFAULT, "cuDeviceGetUuid_v2"));
  EXPECT_EQ(Resolve("cuDeviceGetUuid", 9020, 0, &status), dlsym(RTLD_DEFAULT, "cuDeviceGetUuid"));
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(Resolve("cuMemPoolCreate", 11000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(Resolve("cuNotAFunction", 12000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}
