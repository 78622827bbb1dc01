"""The car's actions (VehicleControlAPI): start it, fuel (in gallons or converted from
liters), climate, lights, tires, navigation and the parking brake."""

from __future__ import annotations

from environments.bfcl.world.skills.session import Act, Session
from rods_env.domain import SkillUnavailable

ZIP_CITIES = (
    "Rivermist", "Stonebrook", "Maplecrest", "Silverpine", "Shadowridge", "Sunset Valley",
    "Oakendale", "Willowbend", "Crescent Hollow", "Autumnville", "San Francisco",
)  # fmt: skip


def vc_start(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    if car.engine_state != "stopped" or car.fuelLevel <= 0:
        raise SkillUnavailable("engine already running or no fuel")
    open_doors = [d for d, status in car.doorStatus.items() if status == "unlocked"]
    if not open_doors or len(open_doors) == len(car.doorStatus):
        raise SkillUnavailable("start needs some doors locked and some not")
    s.call("displayCarStatus", option="doors")
    s.call("lockDoors", unlock=False, door=open_doors)
    s.call("pressBrakePedal", pedalPosition=1.0)
    s.call("startEngine", ignitionMode="START")
    request = s.pick((
        "Start the car: check which doors are still unlocked and lock just those, press the "
        "brake fully, then turn the engine on.",
        "Get the engine running. Lock whatever doors are open first and hold the brake "
        "pedal all the way down.",
        "I'm ready to go: see which doors aren't locked yet, lock them, push the brake "
        "fully and start the engine.",
    ))  # fmt: skip
    return Act(request)


def vc_fill(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    room = int(50 - car.fuelLevel)
    if room < 10:
        raise SkillUnavailable("tank almost full")
    amount = float(s.rng.randint(10, room))
    s.call("displayCarStatus", option="fuel")
    s.call("fillFuelTank", fuelAmount=amount)
    request = s.pick((
        f"Check the fuel level and add {int(amount)} gallons.",
        f"How much fuel is in the tank? Put in another {int(amount)} gallons.",
    ))  # fmt: skip
    return Act(request)


def vc_liters(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    liters = float(s.rng.choice((20, 30, 40, 60)))
    gallons = liters * 0.264172
    if car.fuelLevel + gallons > 50:
        raise SkillUnavailable("would overflow")
    g = s.call("liter_to_gallon", liter=liters)["gallon"]
    s.call("fillFuelTank", fuelAmount=g)
    request = s.pick((
        f"I bought {int(liters)} liters of fuel; convert that to gallons and fill the tank with it.",
        f"Add {int(liters)} liters to the tank (the car takes gallons, so convert first).",
    ))  # fmt: skip
    return Act(request)


def vc_climate(s: Session, items: int) -> Act:
    temp = float(s.rng.randint(18, 26))
    fan = s.rng.choice((20, 40, 60, 80))
    mode = s.rng.choice(("auto", "cool", "heat"))
    s.call("adjustClimateControl", temperature=temp, unit="celsius", fanSpeed=fan, mode=mode)
    request = s.pick((
        f"Set the AC to {int(temp)} degrees celsius, fan speed {fan}, {mode} mode.",
        f"Make it {int(temp)} degrees celsius inside, in {mode} mode with the fan at {fan}.",
    ))  # fmt: skip
    return Act(request)


def vc_lights(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mode = "off" if car.headLightStatus == "on" else "on"
    s.call("setHeadlights", mode=mode)
    request = s.pick((f"Turn the headlights {mode}.", f"Switch the headlights {mode}, please."))
    return Act(request)


def vc_tires(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mean = (car.frontLeftTirePressure + car.frontRightTirePressure + car.rearLeftTirePressure
            + car.rearRightTirePressure) / 4  # fmt: skip
    if 30 <= mean <= 35:
        raise SkillUnavailable("tires are healthy")
    s.call("check_tire_pressure")
    shop = s.call("find_nearest_tire_shop")["shopLocation"]
    s.call("set_navigation", destination=shop)
    request = s.pick((
        "Check my tire pressure; it looks low, so set the navigation to the nearest tire shop.",
        "The tires feel off. Check their pressure and navigate me to the closest tire shop.",
    ))  # fmt: skip
    return Act(request)


def vc_navigate(s: Session, items: int) -> Act:
    city = s.rng.choice(ZIP_CITIES)
    zipcode = s.call("get_zipcode_based_on_city", city=city)["zipcode"]
    s.call("set_navigation", destination=zipcode)
    request = s.pick((
        f"Find the zip code of {city} and set the navigation to it.",
        f"Navigate to {city}; use its zip code as the destination.",
    ))  # fmt: skip
    return Act(request, facts={"city": city})


def vc_park(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mode = "release" if car.parkingBrakeStatus == "engaged" else "engage"
    s.call("activateParkingBrake", mode=mode)
    request = s.pick(
        (f"Please {mode} the parking brake.", f"{mode.capitalize()} the parking brake.")
    )
    return Act(request)
