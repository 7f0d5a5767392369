/*
 * bench_power.h: a kernel run back to back for some seconds, with the
 * energy the GPU drew meanwhile (NVML's energy counter, loaded at run
 * time so that the benchmark needs no NVML to build or to run) and its
 * SM clock sampled between batches: what a GEMM sustains at the power
 * cap and what each call costs in joules, beside the same for its anchor.
 */
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "bench_util.h"
#include "cuda_check.h"

struct Sustained {
    int calls = 0;
    double ms = 0;     /* per call, over the whole run */
    double joules = 0; /* per call; < 0 where NVML is not there */
    double watts = 0, mhz = 0;
};

/* NVML's few entry points, resolved once; dev is the CUDA device 0's. */
class PowerMeter
{
  public:
    PowerMeter()
    {
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return;
        auto init = (int (*)(void))dlsym(h, "nvmlInit_v2");
        auto by_bus = (int (*)(const char *, void **))dlsym(
            h, "nvmlDeviceGetHandleByPciBusId_v2");
        energy_ = (int (*)(void *, unsigned long long *))dlsym(
            h, "nvmlDeviceGetTotalEnergyConsumption");
        clock_ = (int (*)(void *, int, unsigned *))dlsym(
            h, "nvmlDeviceGetClockInfo");
        temp_ = (int (*)(void *, int, unsigned *))dlsym(
            h, "nvmlDeviceGetTemperature");
        char bus[32];
        if (!init || !by_bus || !energy_ || !clock_ || !temp_ || init() != 0 ||
            cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess ||
            by_bus(bus, &dev_) != 0)
            dev_ = nullptr;
    }
    bool ok() const
    {
        return dev_ != nullptr;
    }
    /* millijoules since the driver loaded, or 0 */
    unsigned long long mj() const
    {
        unsigned long long v = 0;
        return ok() && energy_(dev_, &v) == 0 ? v : 0;
    }
    /* the SM clock now, MHz, or 0 (NVML_CLOCK_SM is 1) */
    unsigned sm_mhz() const
    {
        unsigned v = 0;
        return ok() && clock_(dev_, 1, &v) == 0 ? v : 0;
    }

    /* the GPU's temperature now, degrees C, or 0 (NVML_TEMPERATURE_GPU
     * is 0) */
    unsigned temp_c() const
    {
        unsigned v = 0;
        return ok() && temp_(dev_, 0, &v) == 0 ? v : 0;
    }

  private:
    void *dev_ = nullptr;
    int (*energy_)(void *, unsigned long long *) = nullptr;
    int (*clock_)(void *, int, unsigned *) = nullptr;
    int (*temp_)(void *, int, unsigned *) = nullptr;
};

/* The process's one meter (NVML loaded and initialised once). */
inline const PowerMeter &power_meter(void)
{
    static const PowerMeter pm;
    return pm;
}

/* The GPU's temperature and SM clock as a row's measurement starts
 * (a warm GPU reaches its power cap sooner, which moves a ratio of two
 * kernels by several percent): "GPU 41 C, 1980 MHz", or "" without NVML. */
static inline std::string gpu_state(void)
{
    const PowerMeter &pm = power_meter();
    if (!pm.ok())
        return "";
    char s[48];
    snprintf(s, sizeof s, "GPU %u C, %u MHz", pm.temp_c(), pm.sm_mhz());
    return s;
}

/* fn(i) back to back for about `seconds`, in batches of `batch` calls with
 * a synchronize between them (the clock is sampled there). */
template <typename F>
static Sustained sustain(const PowerMeter &pm, F fn, double seconds,
                         int batch = 4)
{
    Sustained r;
    CK(cudaDeviceSynchronize());
    const unsigned long long e0 = pm.mj();
    const double t0 = now_s();
    double t = t0, mhz = 0;
    int samples = 0;
    while (t - t0 < seconds) {
        for (int i = 0; i < batch; i++)
            fn(r.calls + i);
        r.calls += batch;
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        t = now_s();
        const unsigned c = pm.sm_mhz();
        if (c)
            mhz += c, samples++;
    }
    const unsigned long long e1 = pm.mj();
    r.ms = (t - t0) * 1e3 / r.calls;
    r.joules = pm.ok() ? (double)(e1 - e0) * 1e-3 / r.calls : -1;
    r.watts = pm.ok() ? (double)(e1 - e0) * 1e-3 / (t - t0) : 0;
    r.mhz = samples ? mhz / samples : 0;
    return r;
}

/* The header of sustain_pair's rows. */
static inline const char *sustain_header(void)
{
    return "| shape | kernel | ours T/s | anchor T/s | ratio | J a call ours "
           "/ anchor | W ours / anchor | SM MHz ours / anchor |\n"
           "|---|---|---|---|---|---|---|---|\n";
}

/* Ours and the anchor, each back to back: the anchor first as a warm-up
 * to the power cap (not kept), then ours, the anchor, ours, the anchor,
 * `seconds` each. Returns the table row (sustain_header's columns; T/s:
 * tera-operations of `ops` a second). */
template <typename F, typename G>
static std::string sustain_pair(const char *shape, const char *kernel, F ours,
                                G anchor, double ops, double seconds)
{
    const PowerMeter &pm = power_meter();
    sustain(pm, anchor, seconds / 2);
    Sustained o[2], a[2];
    for (int r = 0; r < 2; r++) {
        o[r] = sustain(pm, ours, seconds);
        a[r] = sustain(pm, anchor, seconds);
    }
    auto avg = [](const Sustained(&s)[2], double Sustained::*f) {
        return (s[0].*f + s[1].*f) / 2;
    };
    const double om = avg(o, &Sustained::ms), am = avg(a, &Sustained::ms);
    char row[256];
    snprintf(row, sizeof row,
             "| %s | %s | %.1f | %.1f | %.3f | %.3f / %.3f | %.0f / %.0f | "
             "%.0f / %.0f |\n",
             shape, kernel, ops / om / 1e9, ops / am / 1e9, am / om,
             avg(o, &Sustained::joules), avg(a, &Sustained::joules),
             avg(o, &Sustained::watts), avg(a, &Sustained::watts),
             avg(o, &Sustained::mhz), avg(a, &Sustained::mhz));
    printf("sustained %s", row);
    fflush(stdout);
    return row;
}

/* The mean SM clock over a stretch of work: a thread reads NVML's clock
 * every 100 us between start() and stop() (--clocks: whether a ratio of
 * two kernels is one of their cycles or of the clocks they ran at). */
class ClockSampler
{
  public:
    void start()
    {
        stop_ = false;
        sum_ = 0;
        n_ = 0;
        th_ = std::thread([this] {
            const PowerMeter &pm = power_meter();
            while (!stop_.load()) {
                const unsigned c = pm.sm_mhz();
                if (c)
                    sum_ += c, n_++;
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        });
    }
    /* the mean clock since start(), MHz (0: no samples) */
    double stop()
    {
        stop_ = true;
        th_.join();
        return n_ ? sum_ / n_ : 0;
    }

  private:
    std::thread th_;
    std::atomic<bool> stop_{false};
    double sum_ = 0;
    long n_ = 0;
};
