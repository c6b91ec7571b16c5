// The class of each XID code; the table's sources are cited in docs/probes-agent.md.
#include "collectors/xid_catalogue.h"

#include <algorithm>
#include <array>
#include <utility>

namespace vigil::agent {
namespace {

using enum XidClass;

// Sorted by code; a code not here is unknown (the catalogue's "Unused" codes and codes past 176).
// Class from the catalogue's Immediate Action: RESET_GPU/RESTART_BM -> fatal, RESTART_APP on the
// application's channel -> application, IGNORE on a hardware condition -> hardware, else driver.
// The name is nverror.h's (595.45.04). docs/xid_catalogue.md has each row's reason.
constexpr std::array<std::pair<uint32_t, XidClass>, 115> kClasses = {{
    {8, kApplication},  // ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT
    {11, kApplication},  // ROBUST_CHANNEL_GR_ERROR_MISSING_HW
    {13, kApplication},  // ROBUST_CHANNEL_GR_EXCEPTION
    {14, kDriver},  // ROBUST_CHANNEL_FAKE_ERROR
    {25, kApplication},  // ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY
    {31, kApplication},  // ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT
    {32, kHardware},  // ROBUST_CHANNEL_PBDMA_ERROR
    {37, kDriver},  // ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD
    {38, kDriver},  // ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT
    {39, kApplication},  // ROBUST_CHANNEL_CE0_ERROR
    {40, kApplication},  // ROBUST_CHANNEL_CE1_ERROR
    {41, kApplication},  // ROBUST_CHANNEL_CE2_ERROR
    {43, kApplication},  // ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR
    {44, kDriver},  // ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW
    {45, kApplication},  // ROBUST_CHANNEL_PREEMPTIVE_REMOVAL
    {46, kFatal},  // ROBUST_CHANNEL_GPU_TIMEOUT_ERROR
    {48, kFatal},  // ROBUST_CHANNEL_GPU_ECC_DBE
    {54, kHardware},  // SILENT_RUNNING_PWR_REDUCED_CLOCKING
    {60, kApplication},  // ROBUST_CHANNEL_SEC2_ERROR
    {62, kFatal},  // PMU_HALT_ERROR
    {63, kHardware},  // INFOROM_PAGE_RETIREMENT_EVENT
    {64, kFatal},  // INFOROM_PAGE_RETIREMENT_FAILURE
    {66, kDriver},  // ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION
    {67, kDriver},  // ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION
    {68, kApplication},  // ROBUST_CHANNEL_NVDEC0_ERROR
    {69, kApplication},  // ROBUST_CHANNEL_GR_CLASS_ERROR
    {70, kApplication},  // ROBUST_CHANNEL_CE3_ERROR
    {71, kApplication},  // ROBUST_CHANNEL_CE4_ERROR
    {72, kApplication},  // ROBUST_CHANNEL_CE5_ERROR
    {74, kFatal},  // NVLINK_ERROR
    {75, kApplication},  // ROBUST_CHANNEL_CE6_ERROR
    {76, kApplication},  // ROBUST_CHANNEL_CE7_ERROR
    {77, kApplication},  // ROBUST_CHANNEL_CE8_ERROR
    {78, kDriver},  // VGPU_START_ERROR
    {79, kFatal},  // ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
    {80, kApplication},  // PBDMA_PUSHBUFFER_CRC_MISMATCH
    {82, kApplication},  // ROBUST_CHANNEL_NVJPG0_ERROR
    {83, kApplication},  // ROBUST_CHANNEL_NVDEC1_ERROR
    {84, kApplication},  // ROBUST_CHANNEL_NVDEC2_ERROR
    {85, kApplication},  // ROBUST_CHANNEL_CE9_ERROR
    {86, kApplication},  // ROBUST_CHANNEL_OFA0_ERROR
    {88, kApplication},  // ROBUST_CHANNEL_NVDEC3_ERROR
    {89, kApplication},  // ROBUST_CHANNEL_NVDEC4_ERROR
    {92, kHardware},  // EXCESSIVE_SBE_INTERRUPTS
    {93, kHardware},  // INFOROM_ERASE_LIMIT_EXCEEDED
    {94, kHardware},  // ROBUST_CHANNEL_CONTAINED_ERROR
    {95, kFatal},  // ROBUST_CHANNEL_UNCONTAINED_ERROR
    {96, kApplication},  // ROBUST_CHANNEL_NVDEC5_ERROR
    {97, kApplication},  // ROBUST_CHANNEL_NVDEC6_ERROR
    {98, kApplication},  // ROBUST_CHANNEL_NVDEC7_ERROR
    {99, kApplication},  // ROBUST_CHANNEL_NVJPG1_ERROR
    {100, kApplication},  // ROBUST_CHANNEL_NVJPG2_ERROR
    {101, kApplication},  // ROBUST_CHANNEL_NVJPG3_ERROR
    {102, kApplication},  // ROBUST_CHANNEL_NVJPG4_ERROR
    {103, kApplication},  // ROBUST_CHANNEL_NVJPG5_ERROR
    {104, kApplication},  // ROBUST_CHANNEL_NVJPG6_ERROR
    {105, kApplication},  // ROBUST_CHANNEL_NVJPG7_ERROR
    {106, kDriver},  // SMBPBI_TEST_MESSAGE
    {107, kDriver},  // SMBPBI_TEST_MESSAGE_SILENT
    {108, kApplication},  // NVLINK_REMOTE_TRANSLATION_ERROR
    {109, kFatal},  // ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR
    {110, kFatal},  // SEC_FAULT_ERROR
    {119, kFatal},  // GSP_RPC_TIMEOUT
    {120, kFatal},  // GSP_ERROR
    {121, kHardware},  // C2C_ERROR
    {126, kApplication},  // ROBUST_CHANNEL_CE10_ERROR
    {127, kApplication},  // ROBUST_CHANNEL_CE11_ERROR
    {128, kApplication},  // ROBUST_CHANNEL_CE12_ERROR
    {129, kApplication},  // ROBUST_CHANNEL_CE13_ERROR
    {130, kApplication},  // ROBUST_CHANNEL_CE14_ERROR
    {131, kApplication},  // ROBUST_CHANNEL_CE15_ERROR
    {132, kApplication},  // ROBUST_CHANNEL_CE16_ERROR
    {133, kApplication},  // ROBUST_CHANNEL_CE17_ERROR
    {134, kApplication},  // ROBUST_CHANNEL_CE18_ERROR
    {135, kApplication},  // ROBUST_CHANNEL_CE19_ERROR
    {136, kFatal},  // ALI_TRAINING_FAIL
    {137, kApplication},  // NVLINK_PRIV_ERR
    {139, kApplication},  // ROBUST_CHANNEL_OFA1_ERROR
    {140, kFatal},  // UNRECOVERABLE_ECC_ERROR_ESCAPE
    {141, kDriver},  // ROBUST_CHANNEL_FAST_PATH_ERROR
    {142, kDriver},  // ROBUST_CHANNEL_NVENC3_ERROR
    {143, kFatal},  // GPU_INIT_ERROR
    {144, kFatal},  // NVLINK_SAW_ERROR
    {145, kFatal},  // NVLINK_RLW_ERROR
    {146, kFatal},  // NVLINK_TLW_ERROR
    {147, kDriver},  // NVLINK_TREX_ERROR
    {148, kDriver},  // NVLINK_NVLPW_CTRL_ERROR
    {149, kFatal},  // NVLINK_NETIR_ERROR
    {150, kFatal},  // NVLINK_MSE_ERROR
    {151, kDriver},  // ROBUST_CHANNEL_KEY_ROTATION_ERROR
    {152, kDriver},  // RESERVED7_ERROR
    {153, kDriver},  // RESERVED8_ERROR
    {154, kDriver},  // GPU_RECOVERY_ACTION_CHANGED
    {155, kFatal},  // NVLINK_SW_DEFINED_ERROR
    {156, kFatal},  // RESOURCE_RETIREMENT_EVENT
    {157, kHardware},  // RESOURCE_RETIREMENT_FAILURE
    {158, kFatal},  // GPU_FATAL_TIMEOUT
    {159, kFatal},  // ROBUST_CHANNEL_CHI_NON_DATA_ERROR
    {160, kDriver},  // CHANNEL_RETIREMENT_EVENT
    {161, kDriver},  // CHANNEL_RETIREMENT_FAILURE
    {162, kHardware},  // ISINK_REENGAGED
    {163, kHardware},  // ISINK_DISENGAGED
    {164, kHardware},  // ISINK_LOW_LIFETIME
    {165, kHardware},  // ISINK_ZERO_LIFETIME
    {166, kDriver},  // NVLINK_SECURE_NVLE_ERROR
    {167, kFatal},  // PCIE_FATAL_TIMEOUT
    {168, kHardware},  // REDUCED_GPU_MEMORY_CAPACITY
    {169, kFatal},  // SEC2_HALT_ERROR
    {170, kDriver},  // NVLINK_SECURE_ERROR
    {171, kFatal},  // UNCORRECTABLE_DRAM_ERROR
    {172, kFatal},  // UNCORRECTABLE_SRAM_ERROR
    {173, kFatal},  // C2C_FATAL_LINK_FAILURE
    {174, kApplication},  // ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT
    {175, kFatal},  // MEMORY_SUBSYSTEM_ERROR
    {176, kHardware},  // PCIE_CORRECTABLE_ERROR_FAULT
}};

}  // namespace

XidClass xid_class(uint32_t code) {
  auto it = std::lower_bound(kClasses.begin(), kClasses.end(), code,
                             [](const auto& entry, uint32_t c) { return entry.first < c; });
  return it != kClasses.end() && it->first == code ? it->second : kUnknown;
}

std::string_view xid_class_name(XidClass c) {
  switch (c) {
    case kFatal: return "fatal";
    case kHardware: return "hardware";
    case kDriver: return "driver";
    case kApplication: return "application";
    case kUnknown: break;
  }
  return "unknown";
}

}  // namespace vigil::agent
