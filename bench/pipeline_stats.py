#!/usr/bin/env python3
"""What the driver made of our kernels: VK_KHR_pipeline_executable_properties statistics (registers, spills,
shared memory, instruction counts - whatever the driver reports) for generated variants, read through the
Vulkan loader directly (ctypes; kp does not expose the extension).

    python bench/pipeline_stats.py --only matmul_f32_rb16x8_t256x128,matmul_f16_cm_rb4x2_w2x4_t128x128
    python bench/pipeline_stats.py --only rb8x8 --ir      # also print the internal representations' names and sizes

Each variant's pipeline is built with its generated specialization constants, on a device created with every
feature it reports (as kp patch 0003 does), with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR. Bench-only:
nothing here is imported by the library.
"""
import argparse
import ctypes as C
from pathlib import Path

from evermind_vk.runtime import kernels

# Vulkan enums and structure types used below (vulkan_core.h)
ST_APPLICATION_INFO, ST_INSTANCE_CREATE_INFO, ST_DEVICE_QUEUE_CREATE_INFO, ST_DEVICE_CREATE_INFO = 0, 1, 2, 3
ST_SHADER_MODULE_CREATE_INFO, ST_PIPELINE_SHADER_STAGE_CREATE_INFO = 16, 18
ST_COMPUTE_PIPELINE_CREATE_INFO, ST_PIPELINE_LAYOUT_CREATE_INFO, ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO = 29, 30, 32
ST_PHYSICAL_DEVICE_FEATURES_2 = 1000059000
ST_VULKAN_11_FEATURES, ST_VULKAN_12_FEATURES, ST_VULKAN_13_FEATURES = 49, 51, 53
ST_COOPMAT_FEATURES_KHR = 1000506000
ST_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES = 1000269000
ST_PIPELINE_INFO, ST_PIPELINE_EXECUTABLE_PROPERTIES, ST_PIPELINE_EXECUTABLE_INFO = 1000269001, 1000269002, 1000269003
ST_PIPELINE_EXECUTABLE_STATISTIC, ST_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION = 1000269004, 1000269005
CAPTURE_STATISTICS, CAPTURE_INTERNAL_REPRESENTATIONS = 0x40, 0x80
DESCRIPTOR_STORAGE_BUFFER, STAGE_COMPUTE, QUEUE_COMPUTE = 7, 0x20, 0x2
API_1_3 = (1 << 22) | (3 << 12)
EXT_EXEC_PROPS, EXT_COOPMAT = b"VK_KHR_pipeline_executable_properties", b"VK_KHR_cooperative_matrix"
EXT_COOPMAT2, ST_COOPMAT2_FEATURES_NV = b"VK_NV_cooperative_matrix2", 1000593000  # the cm2 rows (ci/patches/0011)

P, U32, U64, SZ = C.c_void_p, C.c_uint32, C.c_uint64, C.c_size_t


def struct(name, fields):
    return type(name, (C.Structure,), {"_fields_": fields})


AppInfo = struct("AppInfo", [("sType", U32), ("pNext", P), ("pApplicationName", C.c_char_p), ("applicationVersion", U32),
                             ("pEngineName", C.c_char_p), ("engineVersion", U32), ("apiVersion", U32)])
InstanceCI = struct("InstanceCI", [("sType", U32), ("pNext", P), ("flags", U32), ("pApplicationInfo", P),
                                   ("enabledLayerCount", U32), ("ppEnabledLayerNames", P),
                                   ("enabledExtensionCount", U32), ("ppEnabledExtensionNames", P)])
QueueCI = struct("QueueCI", [("sType", U32), ("pNext", P), ("flags", U32), ("queueFamilyIndex", U32),
                             ("queueCount", U32), ("pQueuePriorities", P)])
DeviceCI = struct("DeviceCI", [("sType", U32), ("pNext", P), ("flags", U32), ("queueCreateInfoCount", U32),
                               ("pQueueCreateInfos", P), ("enabledLayerCount", U32), ("ppEnabledLayerNames", P),
                               ("enabledExtensionCount", U32), ("ppEnabledExtensionNames", P), ("pEnabledFeatures", P)])
# A feature structure of any kind: sType, pNext, then room for every VkBool32 it may have (the driver writes
# only the fields of its sType; the rest stay zero).
Features = struct("Features", [("sType", U32), ("pNext", P), ("bools", U32 * 256)])
ExtProps = struct("ExtProps", [("extensionName", C.c_char * 256), ("specVersion", U32)])
QueueFamily = struct("QueueFamily", [("queueFlags", U32), ("queueCount", U32), ("timestampValidBits", U32),
                                     ("granularity", U32 * 3)])
ShaderModuleCI = struct("ShaderModuleCI", [("sType", U32), ("pNext", P), ("flags", U32), ("codeSize", SZ), ("pCode", P)])
LayoutBinding = struct("LayoutBinding", [("binding", U32), ("descriptorType", U32), ("descriptorCount", U32),
                                         ("stageFlags", U32), ("pImmutableSamplers", P)])
SetLayoutCI = struct("SetLayoutCI", [("sType", U32), ("pNext", P), ("flags", U32), ("bindingCount", U32), ("pBindings", P)])
PushRange = struct("PushRange", [("stageFlags", U32), ("offset", U32), ("size", U32)])
PipelineLayoutCI = struct("PipelineLayoutCI", [("sType", U32), ("pNext", P), ("flags", U32), ("setLayoutCount", U32),
                                               ("pSetLayouts", P), ("pushConstantRangeCount", U32),
                                               ("pPushConstantRanges", P)])
SpecEntry = struct("SpecEntry", [("constantID", U32), ("offset", U32), ("size", SZ)])
SpecInfo = struct("SpecInfo", [("mapEntryCount", U32), ("pMapEntries", P), ("dataSize", SZ), ("pData", P)])
StageCI = struct("StageCI", [("sType", U32), ("pNext", P), ("flags", U32), ("stage", U32), ("module", U64),
                             ("pName", C.c_char_p), ("pSpecializationInfo", P)])
ComputeCI = struct("ComputeCI", [("sType", U32), ("pNext", P), ("flags", U32), ("stage", StageCI), ("layout", U64),
                                 ("basePipelineHandle", U64), ("basePipelineIndex", C.c_int32)])
PipelineInfo = struct("PipelineInfo", [("sType", U32), ("pNext", P), ("pipeline", U64)])
ExecProps = struct("ExecProps", [("sType", U32), ("pNext", P), ("stages", U32), ("name", C.c_char * 256),
                                 ("description", C.c_char * 256), ("subgroupSize", U32)])
ExecInfo = struct("ExecInfo", [("sType", U32), ("pNext", P), ("pipeline", U64), ("executableIndex", U32)])
Statistic = struct("Statistic", [("sType", U32), ("pNext", P), ("name", C.c_char * 256), ("description", C.c_char * 256),
                                 ("format", U32), ("value", U64)])
InternalRep = struct("InternalRep", [("sType", U32), ("pNext", P), ("name", C.c_char * 256),
                                     ("description", C.c_char * 256), ("isText", U32), ("dataSize", SZ), ("pData", P)])


class VulkanError(RuntimeError):
    pass


def check(what, res):
    if res != 0:
        raise VulkanError(f"{what} returned VkResult {res}")


def names_array(names):
    arr = (C.c_char_p * len(names))(*names)
    return arr, C.cast(arr, P)


class StatsDevice:
    """A logical device with every reported feature (and pipeline statistics) enabled."""

    def __init__(self, index: int = 0):
        vk = self.vk = C.CDLL("libvulkan.so.1")
        for fn in ("vkCreateInstance", "vkEnumeratePhysicalDevices", "vkCreateDevice", "vkCreateShaderModule",
                   "vkCreateDescriptorSetLayout", "vkCreatePipelineLayout", "vkCreateComputePipelines",
                   "vkEnumerateDeviceExtensionProperties", "vkGetDeviceProcAddr"):
            getattr(vk, fn).restype = C.c_int32 if fn != "vkGetDeviceProcAddr" else P
        self._keep = []
        app = AppInfo(ST_APPLICATION_INFO, None, b"pipeline_stats", 1, b"evermind-vk", 1, API_1_3)
        ici = InstanceCI(ST_INSTANCE_CREATE_INFO, None, 0, C.cast(C.pointer(app), P), 0, None, 0, None)
        self.instance = P()
        check("vkCreateInstance", vk.vkCreateInstance(C.byref(ici), None, C.byref(self.instance)))
        n = U32()
        vk.vkEnumeratePhysicalDevices(self.instance, C.byref(n), None)
        devs = (P * n.value)()
        check("vkEnumeratePhysicalDevices", vk.vkEnumeratePhysicalDevices(self.instance, C.byref(n), devs))
        if index >= n.value:
            raise VulkanError(f"no Vulkan device {index} ({n.value} found)")
        self.phys = P(devs[index])
        props = (C.c_char * 1024)()
        vk.vkGetPhysicalDeviceProperties(self.phys, props)
        self.name = bytes(props[20:276]).split(b"\0")[0].decode()
        ne = U32()
        vk.vkEnumerateDeviceExtensionProperties(self.phys, None, C.byref(ne), None)
        exts = (ExtProps * ne.value)()
        vk.vkEnumerateDeviceExtensionProperties(self.phys, None, C.byref(ne), exts)
        have = {e.extensionName for e in exts}
        if EXT_EXEC_PROPS not in have:
            raise VulkanError(f"{self.name} lacks {EXT_EXEC_PROPS.decode()}")
        cm = EXT_COOPMAT in have
        cm2 = cm and EXT_COOPMAT2 in have  # VK_NV_cooperative_matrix2 builds on the KHR extension
        want = [EXT_EXEC_PROPS] + [EXT_COOPMAT] * cm + [EXT_COOPMAT2] * cm2
        # the feature chain: queried, then passed back as it came (everything the device reports, enabled)
        chain = [Features(ST_PHYSICAL_DEVICE_FEATURES_2), Features(ST_VULKAN_11_FEATURES),
                 Features(ST_VULKAN_12_FEATURES), Features(ST_VULKAN_13_FEATURES),
                 Features(ST_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES)]
        if cm:
            chain.append(Features(ST_COOPMAT_FEATURES_KHR))
        if cm2:
            chain.append(Features(ST_COOPMAT2_FEATURES_NV))
        for a, b in zip(chain, chain[1:]):
            a.pNext = C.cast(C.pointer(b), P)
        self._keep += chain
        vk.vkGetPhysicalDeviceFeatures2(self.phys, C.byref(chain[0]))
        nq = U32()
        vk.vkGetPhysicalDeviceQueueFamilyProperties(self.phys, C.byref(nq), None)
        fams = (QueueFamily * nq.value)()
        vk.vkGetPhysicalDeviceQueueFamilyProperties(self.phys, C.byref(nq), fams)
        qf = next(i for i, f in enumerate(fams) if f.queueFlags & QUEUE_COMPUTE)
        prio = C.c_float(1.0)
        qci = QueueCI(ST_DEVICE_QUEUE_CREATE_INFO, None, 0, qf, 1, C.cast(C.pointer(prio), P))
        ext_arr, ext_ptr = names_array(want)
        dci = DeviceCI(ST_DEVICE_CREATE_INFO, C.cast(C.pointer(chain[0]), P), 0, 1, C.cast(C.pointer(qci), P),
                       0, None, len(want), ext_ptr, None)
        self.device = P()
        check("vkCreateDevice", vk.vkCreateDevice(self.phys, C.byref(dci), None, C.byref(self.device)))
        proto = C.CFUNCTYPE(C.c_int32, P, P, P, P)
        self.get_props = proto(vk.vkGetDeviceProcAddr(self.device, b"vkGetPipelineExecutablePropertiesKHR"))
        self.get_stats = proto(vk.vkGetDeviceProcAddr(self.device, b"vkGetPipelineExecutableStatisticsKHR"))
        self.get_irs = proto(vk.vkGetDeviceProcAddr(self.device, b"vkGetPipelineExecutableInternalRepresentationsKHR"))

    def pipeline(self, variant, ir: bool = False) -> int:
        vk = self.vk
        code = kernels.spirv(variant.spirv)
        buf = C.create_string_buffer(code, len(code))
        smci = ShaderModuleCI(ST_SHADER_MODULE_CREATE_INFO, None, 0, len(code), C.cast(buf, P))
        module = U64()
        check("vkCreateShaderModule", vk.vkCreateShaderModule(self.device, C.byref(smci), None, C.byref(module)))
        nb = len(variant.bindings)
        binds = (LayoutBinding * nb)(*[LayoutBinding(i, DESCRIPTOR_STORAGE_BUFFER, 1, STAGE_COMPUTE, None)
                                       for i in range(nb)])
        slci = SetLayoutCI(ST_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, None, 0, nb, C.cast(binds, P))
        set_layout = U64()
        check("vkCreateDescriptorSetLayout",
              vk.vkCreateDescriptorSetLayout(self.device, C.byref(slci), None, C.byref(set_layout)))
        push = PushRange(STAGE_COMPUTE, 0, 4 * len(variant.push_constants))
        plci = PipelineLayoutCI(ST_PIPELINE_LAYOUT_CREATE_INFO, None, 0, 1, C.cast(C.pointer(set_layout), P),
                                1 if variant.push_constants else 0, C.cast(C.pointer(push), P))
        layout = U64()
        check("vkCreatePipelineLayout", vk.vkCreatePipelineLayout(self.device, C.byref(plci), None, C.byref(layout)))
        vals = [v for _, v in variant.spec_constants]
        data = (U32 * max(1, len(vals)))(*vals)
        entries = (SpecEntry * max(1, len(vals)))(*[SpecEntry(i, 4 * i, 4) for i in range(len(vals))])
        spec = SpecInfo(len(vals), C.cast(entries, P), 4 * len(vals), C.cast(data, P))
        stage = StageCI(ST_PIPELINE_SHADER_STAGE_CREATE_INFO, None, 0, STAGE_COMPUTE, module.value, b"main",
                        C.cast(C.pointer(spec), P))
        cci = ComputeCI(ST_COMPUTE_PIPELINE_CREATE_INFO, None,
                        CAPTURE_STATISTICS | (CAPTURE_INTERNAL_REPRESENTATIONS if ir else 0), stage, layout.value, 0, -1)
        pipe = U64()
        check(f"vkCreateComputePipelines({variant.name})",
              vk.vkCreateComputePipelines(self.device, None, 1, C.byref(cci), None, C.byref(pipe)))
        return pipe.value

    def statistics(self, pipe: int, ir: bool = False) -> list[dict]:
        """[{name, subgroup_size, stats: {name: value}, irs: [(name, is_text, bytes)]}] per executable."""
        pinfo = PipelineInfo(ST_PIPELINE_INFO, None, pipe)
        n = U32()
        check("vkGetPipelineExecutablePropertiesKHR", self.get_props(self.device, C.byref(pinfo), C.byref(n), None))
        props = (ExecProps * n.value)(*[ExecProps(ST_PIPELINE_EXECUTABLE_PROPERTIES) for _ in range(n.value)])
        check("vkGetPipelineExecutablePropertiesKHR", self.get_props(self.device, C.byref(pinfo), C.byref(n), props))
        out = []
        for i, p in enumerate(props):
            einfo = ExecInfo(ST_PIPELINE_EXECUTABLE_INFO, None, pipe, i)
            ns = U32()
            check("vkGetPipelineExecutableStatisticsKHR", self.get_stats(self.device, C.byref(einfo), C.byref(ns), None))
            st = (Statistic * ns.value)(*[Statistic(ST_PIPELINE_EXECUTABLE_STATISTIC) for _ in range(ns.value)])
            check("vkGetPipelineExecutableStatisticsKHR", self.get_stats(self.device, C.byref(einfo), C.byref(ns), st))
            stats = {}
            for s in st:
                raw = U64(s.value)
                stats[s.name.decode()] = (bool(raw.value & 0xFFFFFFFF) if s.format == 0 else
                                          C.c_int64(raw.value).value if s.format == 1 else
                                          C.cast(C.pointer(raw), C.POINTER(C.c_double)).contents.value if s.format == 3
                                          else raw.value)
            irs = []
            if ir:
                nr = U32()
                check("vkGetPipelineExecutableInternalRepresentationsKHR",
                      self.get_irs(self.device, C.byref(einfo), C.byref(nr), None))
                reps = (InternalRep * nr.value)(*[InternalRep(ST_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION)
                                                  for _ in range(nr.value)])
                self.get_irs(self.device, C.byref(einfo), C.byref(nr), reps)  # sizes only (pData NULL)
                bufs = [C.create_string_buffer(r.dataSize) for r in reps]
                for r, b in zip(reps, bufs):
                    r.pData = C.cast(b, P)
                self.get_irs(self.device, C.byref(einfo), C.byref(nr), reps)
                irs = [(r.name.decode(), bool(r.isText), b.raw[:r.dataSize]) for r, b in zip(reps, bufs)]
            out.append({"name": p.name.decode(), "subgroup_size": p.subgroupSize, "stats": stats, "irs": irs})
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="matmul_f32_rb", help="comma-separated substrings of variant names")
    ap.add_argument("--ir", action="store_true", help="also list the internal representations (name, size)")
    ap.add_argument("--dump", default="", help="write each text internal representation into this folder")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    dev = StatsDevice(a.device)
    print(f"# {dev.name}")
    pats = [p for p in a.only.split(",") if p]
    for v in sorted(kernels.manifest().values(), key=lambda v: v.name):
        if not any(p in v.name for p in pats):
            continue
        try:
            execs = dev.statistics(dev.pipeline(v, a.ir or bool(a.dump)), a.ir or bool(a.dump))
        except VulkanError as e:
            print(f"{v.name}: {e}")
            continue
        for ex in execs:
            stats = ", ".join(f"{k}={x:g}" if isinstance(x, float) else f"{k}={x}" for k, x in ex["stats"].items())
            print(f"{v.name} [{ex['name']}, subgroup {ex['subgroup_size']}]: {stats}")
            for name, is_text, data in ex["irs"]:
                print(f"    ir {name}: {'text' if is_text else 'binary'}, {len(data)} bytes")
                if a.dump and is_text:
                    out = Path(a.dump) / f"{v.name}.{name.replace(' ', '_').replace('/', '_')}.txt"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data.rstrip(b"\0"))


if __name__ == "__main__":
    main()
